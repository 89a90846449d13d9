"""Where named presets are cached, whether one is, and the lock that serializes first uses.

The cache root is `$XLNET_TF_HOME` when set, else `$XDG_CACHE_HOME/xlnet_tf`, else
`~/.cache/xlnet_tf`; preset `NAME` lives in `<root>/presets/NAME/`. An entry
directory only ever appears complete (it is renamed into place after the
conversion and its manifest are written), so "the directory has
`preset_manifest.json`" is the whole test for "cached".
"""

import contextlib
import json
import os

HOME_ENV = "XLNET_TF_HOME"
MANIFEST_FILE = "preset_manifest.json"
_LOCK_PREFIX = ".lock-"


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
    """The manifest of a cached preset (files, sha256s, checks), or None when not cached."""
    path = os.path.join(preset_cache_dir(name), MANIFEST_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


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
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(os.path.join(directory, _LOCK_PREFIX + name), "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
