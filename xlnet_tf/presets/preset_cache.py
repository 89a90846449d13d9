"""Where named presets are cached, whether one is, and the lock that serializes first uses.

The cache root is `$XLNET_TF_HOME` when set, else `$XDG_CACHE_HOME/xlnet_tf`, else
`~/.cache/xlnet_tf`; preset `NAME` lives in `<root>/presets/NAME/`. An entry
directory only ever appears complete (it is renamed into place after the
conversion and its manifest are written).

Files can still be damaged later (a full disk, a bad copy, a killed sync tool),
so the manifest also records the size and sha256 of every file of the entry
(`preset_files`), and `entry_problem` checks them on the first load in a process
(once per file: a file whose size and modification time are unchanged since it
passed is not read again). The manifest itself can be damaged too: every reader
goes through `load_manifest`, which reads it and checks its shape with
`check_manifest`, so a damaged one is reported by name, never a traceback.

Anything at `<root>/presets/NAME` but an empty directory is an entry (`is_cached`),
sound or damaged: nothing here removes it unless asked (`download_preset(force=True)`
replaces it whole), so files a user put there are never deleted silently.
"""

import contextlib
import hashlib
import json
import os
import re
import threading

from xlnet_tf.presets.preset_error import PresetError


HOME_ENV = "XLNET_TF_HOME"
MANIFEST_FILE = "preset_manifest.json"
_LOCK_PREFIX = ".lock-"
_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHOWN_CHARS = 72  # a quoted sha256 fits whole
# path -> (size, mtime_ns) of the files that passed their check in this process.
_VERIFIED = {}
_VERIFIED_LOCK = threading.Lock()


def cache_root():
    """The root of the xlnet_tf cache (see the module docstring)."""
    root = os.environ.get(HOME_ENV)
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "xlnet_tf")
    return os.path.abspath(os.path.expanduser(root))


def presets_dir():
    """The folder holding one directory per cached preset."""
    return os.path.join(cache_root(), "presets")


def preset_cache_dir(name):
    """The cache directory of preset `name` (it may not exist yet)."""
    return os.path.join(presets_dir(), name)


def cache_location_problem():
    """Why the presets folder cannot be used (something that is not a directory in its way), or None."""
    path = presets_dir()
    while not os.path.isdir(path):
        # `isdir` is asked again after `lexists`: another process's first use may have just made this
        # directory between the two questions, and a directory never turns back into something else here.
        if os.path.lexists(path) and not os.path.isdir(path):
            return f"{path} exists and is not a directory"
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return None


def check_cache_location():
    """Raises a `PresetError` naming the path and the fix when the presets folder cannot be used."""
    problem = cache_location_problem()
    if problem:
        raise PresetError(f"The preset cache {presets_dir()} cannot be used: {problem}. Move it out of the way, "
                          f"or set ${HOME_ENV} to a directory.")


def is_cached(name):
    """Whether preset `name` has a cache entry, sound or damaged (`entry_problem` tells which).

    Anything at the entry's path counts but an empty directory (which holds nothing to lose).
    """
    directory = preset_cache_dir(name)
    if not os.path.lexists(directory):
        return False
    try:
        return not os.path.isdir(directory) or bool(os.listdir(directory))
    except OSError:
        return True  # Unlistable: `entry_problem` names the reason.


def read_manifest(name):
    """The checked manifest of a cached preset (files, sha256s, checks), or None when not cached.

    Returns:
        The manifest (`check_manifest` has checked `preset_files`), or None.

    Raises:
        PresetError: the entry or its manifest is damaged; the message names the file, what is
            wrong and the fix (`download_preset(name, force=True)`).
    """
    if not is_cached(name):
        return None
    directory = preset_cache_dir(name)
    try:
        return _entry_manifest(directory)
    except ValueError as e:
        raise PresetError(damaged_entry_message(name, directory, str(e))) from None


def _entry_manifest(directory):
    """The checked manifest of the entry `directory`; a `ValueError` saying what is wrong otherwise."""
    if not os.path.isdir(directory):
        raise ValueError("it is not a directory" if os.path.lexists(directory) else "it does not exist")
    manifest = load_manifest(directory)
    if manifest is None:
        raise ValueError(f"{MANIFEST_FILE} is missing")
    return manifest


def load_manifest(directory):
    """Reads `preset_manifest.json` of `directory` and checks its shape (`check_manifest`).

    Returns:
        The manifest, or None when `directory` has no such file.

    Raises:
        ValueError: the file cannot be read, is empty, is not UTF-8 or JSON, or has the wrong
            shape; one sentence starting with the file name.
    """
    path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.lexists(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{MANIFEST_FILE} cannot be read ({e.strerror or e})") from None
    if not data.strip():
        raise ValueError(f"{MANIFEST_FILE} is empty")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{MANIFEST_FILE} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
                         ) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{MANIFEST_FILE} is not valid JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"{MANIFEST_FILE} is not a manifest (JSON nested too deeply to read)") from None
    check_manifest(manifest)
    return manifest


def check_manifest(manifest):
    """Checks every key the cache reads from a parsed `preset_manifest.json`.

    The manifest must be a JSON object whose `preset_files` is a list of objects,
    each with `path` (`/`-separated, relative, inside the entry), `size` (a whole
    number of bytes >= 0) and `sha256` (64 lowercase hex digits). The other keys
    (`files`, `source`, ...) record the download for people and are not read.

    Args:
        manifest: the parsed JSON value.

    Returns:
        The `preset_files` records.

    Raises:
        ValueError: one sentence naming the file, the first wrong key or entry, its value and
            what was expected.
    """
    if not isinstance(manifest, dict):
        raise ValueError(f"{MANIFEST_FILE} holds {_shown(manifest)}, expected a JSON object with preset_files")
    if "preset_files" not in manifest:
        raise ValueError(f"{MANIFEST_FILE} records no preset_files")
    records = manifest["preset_files"]
    if not isinstance(records, list):
        raise ValueError(f"{MANIFEST_FILE}: preset_files is {_shown(records)}, expected a list of objects "
                         "with path, size and sha256")
    for index, record in enumerate(records):
        problem = _record_shape_problem(record)
        if problem:
            raise ValueError(f"{MANIFEST_FILE}: preset_files[{index}]{problem}")
    return records


def _record_shape_problem(record):
    """What is wrong with one `preset_files` record, as a phrase following `preset_files[i]`, or None."""
    if not isinstance(record, dict):
        return f" is {_shown(record)}, expected an object with path, size and sha256"
    for key, (kind, is_valid, expected) in _RECORD_KEYS.items():
        if key not in record:
            return f" has no {key}, expected {expected}"
        value = record[key]
        right_kind = isinstance(value, kind) and not isinstance(value, bool)
        if not (right_kind and is_valid(value)):
            return f".{key} is {_shown(value, with_kind=not right_kind)}, expected {expected}"
    return None


def _is_entry_path(value):
    """Whether `value` names a file inside the entry: relative, `/`-separated, no `.`/`..`, not the manifest."""
    return value != MANIFEST_FILE and all(part not in ("", ".", "..") for part in value.split("/"))


def _shown(value, with_kind=True):
    """A JSON value for a message: short, on one line, with its JSON type when that is the problem."""
    text = json.dumps(value, ensure_ascii=True)
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS - 3] + "..."
    if value is None or not with_kind:
        return text
    kinds = ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"), (list, "a list"),
             (dict, "an object"))
    return f"{text} ({next(kind for types, kind in kinds if isinstance(value, types))})"


# key of a `preset_files` record: (JSON type, check of the value, what a message says is expected)
_RECORD_KEYS = {
    "path": (str, _is_entry_path, "a relative path inside the entry"),
    "size": (int, lambda value: value >= 0, "a whole number of bytes >= 0"),
    "sha256": (str, lambda value: _SHA256.fullmatch(value) is not None, "64 lowercase hex digits"),
}


def file_sha256(path):
    """Hex sha256 of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def preset_file_records(directory):
    """`[{"path", "size", "sha256"}]` of every file under `directory` but the manifest (sorted paths)."""
    records = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            if relative != MANIFEST_FILE:
                records.append({"path": relative, "size": os.path.getsize(path), "sha256": file_sha256(path)})
    return sorted(records, key=lambda record: record["path"])


def entry_problem(directory):
    """Why the cached preset in `directory` cannot be trusted, or None when every file checks out.

    The entry must be a directory whose manifest reads and has the right shape
    (`load_manifest`); each file recorded in it must exist with its recorded
    size and sha256. A file that passed keeps its result for this process while
    its size and modification time stay the same.

    Returns:
        None, or one sentence naming what is damaged (the manifest, or every damaged file) and how.
    """
    try:
        records = _entry_manifest(directory)["preset_files"]
    except ValueError as e:
        return str(e)
    problems = []
    for record in records:
        path = os.path.join(directory, *record["path"].split("/"))
        problem = _record_problem(path, record)
        if problem:
            problems.append(f"{record['path']}: {problem}")
    return "; ".join(problems) or None


def _record_problem(path, record):
    if _passed(path):
        return None
    if not os.path.isfile(path):
        return "missing"
    try:
        size = os.path.getsize(path)
        digest = file_sha256(path) if size == record["size"] else None
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if size != record["size"]:
        return f"{size} bytes, the manifest records {record['size']}"
    if digest != record["sha256"]:
        return f"sha256 {digest}, the manifest records {record['sha256']}"
    _remember(path)
    return None


def _stamp(path):
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def _passed(path):
    try:
        stamp = _stamp(path)
    except OSError:
        return False
    with _VERIFIED_LOCK:
        return _VERIFIED.get(os.path.abspath(path)) == stamp


def _remember(path):
    stamp = _stamp(path)
    with _VERIFIED_LOCK:
        _VERIFIED[os.path.abspath(path)] = stamp


def damaged_entry_message(name, directory, problem):
    """The error for a damaged cache entry: the preset, the files, and the fix."""
    return (f"Preset {name!r}: the cached copy in {directory} is damaged ({problem}). Download it again with "
            f"`xlnet-tf presets --download {name} --force` (Python: "
            f"`xlnet_tf.presets.download_preset({name!r}, force=True)`).")


@contextlib.contextmanager
def preset_lock(name):
    """Holds an exclusive lock for preset `name` (blocking) across processes and threads.

    `fcntl.flock` on `<presets>/.lock-NAME`: the OS drops it when the holder
    dies, so a killed download never blocks the next one. Where `fcntl` does
    not exist (Windows) no lock is taken; entries are still never half-written,
    but two simultaneous first uses may both download.
    """
    directory = presets_dir()
    os.makedirs(directory, exist_ok=True)
    try:
        import fcntl  # optional dependency: POSIX only (no lock on Windows)
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(os.path.join(directory, _LOCK_PREFIX + name), "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
