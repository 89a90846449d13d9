"""Files on any filesystem: the file functions of a path, reads, and atomic writes of every file a run leaves behind.

`gfile(path)` is `tf.io.gfile` where TensorFlow is installed (local, `gs://`, `ram://`); without it
(JAX or PyTorch alone) local paths use `os`, `shutil` and `open` behind the same names
(`LocalFiles`), and a `gs://` or `ram://` path raises the one-line `TensorFlowRequiredError`.
TensorFlow is imported on the first non-local use, not with this module.

A reader (a resumed run, `xlnet-tf export`, TF Serving) must never see a
half-written file: each function here writes to a temporary sibling named
`.tmp-<uuid>-<basename>` in the target's directory, flushes it, then renames it
over the target. A writer killed mid-write leaves only such a temporary, which
no reader looks at (the name starts with `.tmp-`) and which the next write of
the same target removes. Paths go through `tf.io.gfile`, so local directories,
`gs://` buckets and TensorFlow's in-memory `ram://` filesystem all work; rename
with overwrite works on all three (object stores emulate it by copy + delete,
which still never exposes a partial object under the target name). Local
paths use `os` directly (no TensorFlow import: the vocabulary trainer stays light);
the HDF5 checks read local files through `tf.io.gfile` when TensorFlow is installed
and with `open` when it is not (`gfile`).

Example:
>>> from xlnet_tf.storage import atomic_files
>>> atomic_files.write_json("/tmp/doc_run/result.json", {"loss": 0.5})
'/tmp/doc_run/result.json'
>>> atomic_files.read_json("/tmp/doc_run/result.json")
{'loss': 0.5}
>>> files = atomic_files.gfile("/tmp/doc_run")
>>> files.isdir("/tmp/doc_run")
True
"""

import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
import types
import uuid

from xlnet_tf import tensorflow_required

_log = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
_WEIGHTS_SUFFIX = ".weights.h5"


def _h5py():
    """h5py, for weights files only."""
    import h5py  # import time: Beam workers and `xlnet-tf presets` import this module and never touch HDF5

    return h5py


def is_local(path):
    """Whether `path` is a plain local path (no `scheme://`)."""
    return "://" not in str(path)


class LocalFiles:
    """The part of `tf.io.gfile` this package uses, for local paths, in plain Python."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    listdir = staticmethod(os.listdir)
    remove = staticmethod(os.remove)
    rmtree = staticmethod(shutil.rmtree)
    walk = staticmethod(os.walk)
    GFile = staticmethod(open)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def copy(source, target, overwrite=False):
        if not overwrite and os.path.exists(target):
            raise FileExistsError(f"{target} exists; copy with overwrite=True to replace it.")
        shutil.copyfile(source, target)

    @staticmethod
    def rename(source, target, overwrite=False):
        if overwrite:
            os.replace(source, target)
            return
        os.link(source, target)  # fails with FileExistsError when `target` exists: no check-then-act race
        os.remove(source)

    @staticmethod
    def stat(path):
        """`length` (bytes) and `mtime_nsec` of `path`, the fields of `tf.io.gfile.stat` read here."""
        result = os.stat(path)
        return types.SimpleNamespace(length=result.st_size, mtime_nsec=result.st_mtime_ns)


def gfile(path):
    """`tf.io.gfile` when TensorFlow is installed or `path` is not local, else `LocalFiles`.

    Raises:
        TensorFlowRequiredError: `path` is not local and TensorFlow is not installed.
    """
    if is_local(path) and not tensorflow_required.tensorflow_available():
        return LocalFiles
    return tensorflow_required.require_tensorflow(f"Reading or writing {path}").io.gfile


def not_found_errors(path):
    """The exceptions a missing `path` raises through `gfile(path)`."""
    if gfile(path) is LocalFiles:
        return (FileNotFoundError,)
    tf = tensorflow_required.require_tensorflow(f"Reading or writing {path}")
    return (FileNotFoundError, tf.errors.NotFoundError)


def already_exists_errors(path):
    """The exceptions `gfile(path).rename(..., overwrite=False)` raises onto an existing `path`."""
    if gfile(path) is LocalFiles:
        return (FileExistsError,)
    tf = tensorflow_required.require_tensorflow(f"Reading or writing {path}")
    return (FileExistsError, tf.errors.AlreadyExistsError)


def read_errors(path):
    """The exceptions reading `path` through `gfile(path)` may raise besides Python's own."""
    if gfile(path) is LocalFiles:
        return ()
    tf = tensorflow_required.require_tensorflow(f"Reading or writing {path}")
    return (tf.errors.OpError,)


def _files(path):
    """`os`-based helpers for local paths, `tf.io.gfile` for every other filesystem."""
    if is_local(path):
        return LocalFiles
    return gfile(path)


def is_temporary(path):
    """Whether `path` names a temporary file of an unfinished (or killed) atomic write."""
    return os.path.basename(str(path).rstrip("/")).startswith(TEMP_PREFIX)


def _split(path):
    """`(directory, name)` of `path`, keeping a filesystem root such as `ram://` whole.

    `os.path.split("ram://run")` gives `("ram:", "run")`, a local directory name:
    temporaries of a top-level `ram://` or `gs://` entry would land on the local disk.
    """
    path = str(path).rstrip("/")
    directory, name = os.path.split(path)
    if not is_local(path) and "://" not in directory:
        directory = path[:len(path) - len(name)]  # "ram://", "gs://"
    return directory, name


def temporary_path(path):
    """A fresh temporary sibling of `path`: same directory, `.tmp-<uuid>-<basename>`."""
    path = str(path).rstrip("/")
    directory, name = _split(path)
    return os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name}")


def remove_stale_temporaries(path):
    """Removes temporaries of `path` left by a killed writer; returns the removed paths.

    Only names of the form `.tmp-<32 hex>-<basename of path>` in the same
    directory are touched, so other files' temporaries are left alone.
    """
    path = str(path).rstrip("/")
    directory, name = _split(path)
    directory = directory or "."
    files = _files(directory)
    if not files.isdir(directory):
        return []
    removed = []
    for entry in files.listdir(directory):
        entry = entry.rstrip("/")
        if not (entry.startswith(TEMP_PREFIX) and entry.endswith("-" + name)):
            continue
        middle = entry[len(TEMP_PREFIX):-len(name) - 1]
        if len(middle) != 32:
            continue
        stale = os.path.join(directory, entry)
        vanished = OSError if is_local(stale) else not_found_errors(stale)
        try:
            if files.isdir(stale):
                files.rmtree(stale)
            else:
                files.remove(stale)
            removed.append(stale)
        except vanished:
            pass  # Removed by someone else meanwhile.
    if removed:
        _log.info("Removed temporaries of an interrupted write: %s", ", ".join(removed))
    return removed


def _prepare(path):
    path = str(path)
    directory = _split(path)[0]
    if directory and not directory.endswith("://"):  # a filesystem root always exists
        _files(directory).makedirs(directory)
    remove_stale_temporaries(path)
    return path


def _fsync_local(path):
    # Durable before the rename, so a power cut cannot leave the new name with no data.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(temporary):
    files = _files(temporary)
    with contextlib.suppress(Exception):  # Best effort: a leftover temporary is harmless.
        if files.isdir(temporary):
            files.rmtree(temporary)
        elif files.exists(temporary):
            files.remove(temporary)


@contextlib.contextmanager
def _temporary_for(path):
    """Yields a fresh temporary sibling of `path`; removes it again when the block raises.

    `BaseException` included: an interrupted write (Ctrl-C, a timeout) leaves nothing behind either.
    """
    temporary = temporary_path(path)
    try:
        yield temporary
    except BaseException:
        _discard(temporary)
        raise


def _commit(temporary, path):
    if is_local(path):
        _fsync_local(temporary)
        os.replace(temporary, path)
    else:
        gfile(path).rename(temporary, path, overwrite=True)


def write_bytes(path, data):
    """Writes `data` to `path` atomically; returns `path`.

    Args:
        path: target file (local, `gs://`, `ram://`, ...); parent directories are created.
        data: `bytes`.

    Returns:
        `path`.

    Example:
    >>> write_bytes("ram://doc/atomic.bin", b"abc")
    'ram://doc/atomic.bin'
    """
    path = _prepare(path)
    with _temporary_for(path) as temporary:
        with _files(temporary).GFile(temporary, "wb") as f:
            f.write(data)
            f.flush()
        _commit(temporary, path)
    return path


def tfrecord_frame(record):
    """`record` framed as one TFRecord entry: the bytes `tf.io.TFRecordWriter` writes for it (uncompressed).

    Layout: length (uint64 little-endian), masked CRC-32C of those 8 bytes, the
    record, masked CRC-32C of the record. Spelled here so the Beam workers write
    shards without importing TensorFlow (seconds of CPU per worker process).

    Example:
    >>> tfrecord_frame(b"abc").hex()
    '0300000000000000b099490e6162636e57f121'
    """
    return b"".join((_length_header(len(record)), record, _masked_crc(record)))


@functools.lru_cache(maxsize=1 << 12)
def _length_header(length):
    """A TFRecord entry's first 12 bytes: records of a shard have few distinct lengths, so each is built once."""
    length = length.to_bytes(8, "little")
    return length + _masked_crc(length)


def _masked_crc(data):
    import google_crc32c  # optional dependency: the beam extra installs it (only the Beam jobs write records)

    crc = google_crc32c.value(data)
    # TFRecord's mask: rotate right by 15 bits, add a constant (so CRCs of CRCs stay well distributed).
    return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")


def write_records(path, records):
    """Writes `records` (an iterable of `bytes`) as a TFRecord file at `path`, atomically; returns their count.

    Local paths are written with plain file I/O (no TensorFlow import); other
    filesystems go through `tf.io.gfile`. The bytes equal `tf.io.TFRecordWriter`'s.
    Unlike the other writers here it neither creates the directory nor lists it
    for a killed writer's temporaries: a job writing a thousand shards into one
    `gs://` directory would list it a thousand times. Such a temporary
    (`.tmp-<uuid>-<name>`) matches no shard glob.

    Example:
    >>> tf.io.gfile.makedirs("ram://doc")  # doctest: +SKIP
    >>> write_records("ram://doc/records.tfrecord", [b"a", b"bc"])
    2
    """
    path = str(path)
    count = 0
    with _temporary_for(path) as temporary:
        with _files(temporary).GFile(temporary, "wb") as f:
            buffer, buffered = [], 0
            for record in records:
                frame = tfrecord_frame(record)
                buffer.append(frame)
                buffered += len(frame)
                count += 1
                if buffered >= 1 << 22:  # a few large writes, not one per record
                    f.write(b"".join(buffer))
                    buffer, buffered = [], 0
            f.write(b"".join(buffer))
            f.flush()
        _commit(temporary, path)
    return count


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically; returns `path`."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path, obj, *, indent=2, sort_keys=True):
    """Writes `obj` as JSON (with a final newline) to `path` atomically; returns `path`."""
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n")


def read_text(path):
    """The text of `path`, read through `tf.io.gfile`."""
    with _files(str(path)).GFile(str(path), "r") as f:
        return f.read()


def read_json(path, kind="JSON"):
    """The JSON value in `path`, read through `tf.io.gfile`.

    Args:
        path: the file (local, `gs://`, `ram://`, ...).
        kind: what the file holds, for the not-found message (e.g. `"Config"`).

    Raises:
        FileNotFoundError: `"<kind> file not found: <path>"`.
        ValueError: `"<path> is not valid JSON: <the parser's reason>"`.

    Example:
    >>> read_json(write_json("ram://doc/values.json", {"a": 1}))
    {'a': 1}
    """
    path = str(path)
    if not _files(path).exists(path):
        raise FileNotFoundError(f"{kind} file not found: {path}")
    with _files(path).GFile(path, "rb") as f:
        data = f.read()  # Bytes: json decodes UTF-8 whatever the locale's encoding.
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error


def save_weights(model, path, *, attributes=None, **kwargs):
    """`model.save_weights(path)`, atomically.

    Keras writes `.weights.h5` files in place (and for remote paths writes a
    local file, then copies it); a kill mid-write leaves a truncated HDF5 file
    under the real name. Here Keras writes `.tmp-<uuid>-<name>.weights.h5`
    (the name still ends in `.weights.h5`, which Keras requires) and the
    finished file is renamed over `path`.

    Args:
        model: a built Keras model (or layer).
        path: target, ending in `.weights.h5`.
        attributes: optional dict stored as HDF5 attributes of the file's root
            (e.g. the epoch of a backup); Keras ignores them when loading. Read
            them back with `weights_file_attributes`.
        **kwargs: passed to `model.save_weights`.

    Returns:
        `path`.
    """
    path = str(path)
    if not path.endswith(_WEIGHTS_SUFFIX):
        raise ValueError(f"Weights file name must end in {_WEIGHTS_SUFFIX!r}: {path}")
    path = _prepare(path)
    if attributes and not is_local(path):
        # h5py edits local files only: write and annotate locally, then copy over atomically.
        local_dir = tempfile.mkdtemp(prefix="xlnet-weights-")
        try:
            local = save_weights(model, os.path.join(local_dir, os.path.basename(path)),
                                 attributes=attributes, **kwargs)
            return copy_file(local, path)
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)
    with _temporary_for(path) as temporary:
        model.save_weights(temporary, **kwargs)
        if attributes:
            h5py = _h5py()
            with h5py.File(temporary, "a") as f:
                for key, value in attributes.items():
                    f.attrs[key] = value
        _commit(temporary, path)
    return path


def weights_file_attributes(path):
    """The root attributes of the HDF5 file `path` (what `save_weights(attributes=)` stored)."""
    h5py = _h5py()
    with gfile(path).GFile(str(path), "rb") as raw, h5py.File(raw, "r") as h5:
        return {key: (value.item() if hasattr(value, "item") else value)
                for key, value in h5.attrs.items()}


def copy_file(source, target):
    """Copies `source` to `target` atomically (the target is complete or untouched); returns `target`."""
    target = _prepare(target)
    with _temporary_for(target) as temporary:
        if is_local(source) and is_local(target):
            shutil.copyfile(source, temporary)
        else:
            filesystem = gfile(source if not is_local(source) else target)
            filesystem.copy(str(source), temporary, overwrite=True)
        _commit(temporary, target)
    return target


def _move_directory(source, target):
    """Renames directory `source` to `target` (which must not exist).

    Local: one `os.rename`, atomic. Elsewhere a directory is a set of objects
    (`gs://`, and `ram://`, whose rename moves no children): each file is
    renamed on its own, each arriving complete.
    """
    if is_local(source):
        os.rename(source, target)
        return
    filesystem = gfile(source)
    for directory, _, files in filesystem.walk(source):
        relative = os.path.relpath(directory, source) if directory != source else ""
        destination = os.path.join(target, relative) if relative else target
        filesystem.makedirs(destination)
        for name in files:
            filesystem.rename(os.path.join(directory, name), os.path.join(destination, name), overwrite=True)
    filesystem.rmtree(source)


def replace_directory(build, path):
    """Builds a directory under a temporary sibling name, then renames it to `path`.

    `build(temporary_dir)` writes the whole directory (e.g. a SavedModel). An
    existing `path` is moved aside first and removed after the rename. Locally
    a kill at any point leaves the old complete directory, the new complete
    one, or (between the two renames, a moment) the old one under a `.tmp-`
    name, never a partial directory under `path`. On object stores (`gs://`)
    directories are renamed file by file: every file arrives complete, the set
    is complete when this function returns.

    Args:
        build: a callable taking the temporary directory path.
        path: the final directory.

    Returns:
        `path`.
    """
    path = _prepare(str(path).rstrip("/"))
    with _temporary_for(path) as temporary:
        build(temporary)
        if _files(path).exists(path):
            previous = temporary_path(path)
            _move_directory(path, previous)
            _move_directory(temporary, path)
            _discard(previous)
        else:
            _move_directory(temporary, path)
    return path


def weights_file_problem(path):
    """Why the HDF5 file `path` is unreadable, or None when it reads back completely.

    Opens the file through `tf.io.gfile` (any filesystem) with h5py, which
    detects truncation against the size recorded in the superblock, then reads
    every dataset, which catches damage inside the file.

    Returns:
        None, or a one-line reason such as "truncated file: eof = 100, ...".
    """
    h5py = _h5py()
    path = str(path)
    filesystem = gfile(path)
    if not filesystem.exists(path):
        return "file not found"
    try:
        with filesystem.GFile(path, "rb") as raw, h5py.File(raw, "r") as h5:

            def read(name, item):
                if isinstance(item, h5py.Dataset):
                    item[()]

            h5.visititems(read)
        return None
    except (OSError, KeyError, ValueError, RuntimeError, *read_errors(path)) as error:
        reason = str(error).replace("Unable to synchronously open file ", "").strip()
        return reason.strip("()") or type(error).__name__


def weights_file_is_readable(path):
    """Whether the HDF5 (`.weights.h5`) file `path` exists and reads back completely."""
    return weights_file_problem(path) is None
