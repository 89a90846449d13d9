"""The file functions for a path: `tf.io.gfile` where TensorFlow is installed, plain Python for local paths without it.

With TensorFlow every path goes through `tf.io.gfile`, as it always has (local, `gs://`,
`ram://`). Without it (JAX or PyTorch alone) local paths use `os`, `shutil` and `open`
behind the same names, and a `gs://` or `ram://` path raises the one-line
`TensorFlowRequiredError`. TensorFlow is imported on the first non-local use, not with
this module.

Example:
>>> from xlnet_tf.storage import file_system
>>> files = file_system.gfile("/tmp/run")
>>> files.makedirs("/tmp/run"); files.isdir("/tmp/run")
True
"""

import os
import shutil
import types

from xlnet_tf import tensorflow_required


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
