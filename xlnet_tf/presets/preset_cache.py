"""Where named presets are cached, whether one is, and the lock that serializes first uses.

The cache root is `$XLNET_TF_HOME` when set, else `$XDG_CACHE_HOME/xlnet_tf`, else
`~/.cache/xlnet_tf`; preset `NAME` lives in `<root>/presets/NAME/`. An entry
directory only ever appears complete (it is renamed into place after the
conversion and its manifest are written), so "the directory has
`preset_manifest.json`" is the whole test for "cached".

Files can still be damaged later (a full disk, a bad copy, a killed sync tool),
so the manifest also records the size and sha256 of every file of the entry
(`preset_files`), and `entry_problem` checks them on the first load in a process
(once per file: a file whose size and modification time are unchanged since it
passed is not read again).
"""

import contextlib
import hashlib
import json
import os
import threading


HOME_ENV = "XLNET_TF_HOME"
MANIFEST_FILE = "preset_manifest.json"
_LOCK_PREFIX = ".lock-"
_CHUNK = 1 << 20
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


def is_cached(name):
    """Whether preset `name` has a complete cache entry."""
    return os.path.isfile(os.path.join(preset_cache_dir(name), MANIFEST_FILE))


def read_manifest(name):
    """The manifest of a cached preset (files, sha256s, checks), or None when not cached.

    Raises:
        ValueError: the manifest is not valid JSON (a damaged entry).
    """
    return _read_manifest(preset_cache_dir(name))


def _read_manifest(directory):
    path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{MANIFEST_FILE} is not valid JSON ({e})") from e


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

    Each file recorded in the manifest must exist with its recorded size and
    sha256. A file that passed keeps its result for this process while its size
    and modification time stay the same.

    Returns:
        None, or one sentence naming every damaged file and what is wrong with it.
    """
    try:
        manifest = _read_manifest(directory)
    except (OSError, ValueError) as e:
        return str(e)
    if manifest is None:
        return f"{MANIFEST_FILE} is missing"
    records = manifest.get("preset_files") if isinstance(manifest, dict) else None
    if records is None:
        return f"{MANIFEST_FILE} records no preset_files"
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
