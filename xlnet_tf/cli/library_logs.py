"""Quiet start-up of every `xlnet-tf` command: the libraries' own log lines only with `--verbose`.

Without it a command on a CPU-only machine prints, before its own output,
TensorFlow's start-up notices (oneDNN, CUDA probing such as `failed call to
cuInit`, CPU instruction sets), Beam's `WARNING:root:apitools not found...`
and absl's warnings. `quiet_library_logs()` turns them off before TensorFlow or
Beam is imported:

- `TF_CPP_MIN_LOG_LEVEL=3` for TensorFlow's C++ logging (unless the user set it);
- the lines TensorFlow's native libraries write while they load, before their
  logging reads that variable (`WARNING: All log messages before
  absl::InitializeLog() ...`, the oneDNN and CUDA-driver notices): standard error
  is sent elsewhere while the `tensorflow` module itself executes, and shown
  after all when that import fails;
- the `root`, `absl`, `tensorflow` and `apache_beam` Python loggers at ERROR.

Messages about the user's own run stay: the project's loggers (`xlnet_tf.*`)
and Beam's about the options it was given (`Unparseable argument: --direct_num_worker.
Did you mean '--direct_num_workers'?`) keep WARNING, and the project's
`warnings.warn` and printed warnings are untouched.
"""

import contextlib
import importlib.util
import logging
import os
import sys
import tempfile

# Python loggers of the libraries whose INFO and WARNING lines a user did not ask for.
LIBRARY_LOGGERS = ("", "absl", "tensorflow", "apache_beam")
# Loggers that speak of the user's own run and command line: they keep WARNING.
KEPT_LOGGERS = ("xlnet_tf", "apache_beam.options")
# Modules whose native libraries write to standard error while they load.
NATIVE_NOISE_MODULES = ("tensorflow",)


def quiet_library_logs(verbose=False):
    """Silences the libraries' start-up and log lines, unless `verbose`.

    Call before TensorFlow or Beam is imported; an already imported TensorFlow
    has printed its start-up lines and keeps its C++ log level.

    Args:
        verbose: leave every library's logging as it is (`xlnet-tf --verbose`).

    Example:
    >>> quiet_library_logs(verbose=True)  # `xlnet-tf --verbose COMMAND`: changes nothing
    """
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for name in KEPT_LOGGERS:
        kept = logging.getLogger(name)
        if kept.level == logging.NOTSET:  # Would inherit ERROR.
            kept.setLevel(logging.WARNING)
    for name in NATIVE_NOISE_MODULES:
        if name not in sys.modules and not any(
                isinstance(finder, _QuietLoad) and finder.name == name for finder in sys.meta_path):
            sys.meta_path.insert(0, _QuietLoad(name))


@contextlib.contextmanager
def native_stderr_captured():
    """Sends file descriptor 2 (C and C++ code's standard error) to a temporary file.

    What was written is discarded when the block succeeds and written to the
    real standard error when it raises, so a failing import keeps its story.
    Without a standard error or a temporary file the block runs as is.
    """
    _flush_stderr()
    with contextlib.ExitStack() as files:
        try:
            captured = files.enter_context(tempfile.TemporaryFile())
            saved = os.dup(2)
        except OSError:  # No temporary file, or no standard error (a detached process).
            captured = None
        if captured is None:
            yield
            return
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            _restore(saved)
            captured.seek(0)
            os.write(2, captured.read())
            raise
        _restore(saved)


def _flush_stderr():
    if sys.stderr is not None:
        sys.stderr.flush()


def _restore(saved):
    _flush_stderr()
    os.dup2(saved, 2)
    os.close(saved)


class _QuietLoad:
    """A `sys.meta_path` finder that loads one top-level module under `native_stderr_captured`."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # One import; the other finders locate the module.
        spec = importlib.util.find_spec(fullname)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_quietly(module):
            with native_stderr_captured():
                exec_module(module)

        # The loader belongs to this one spec, so the override touches nothing else.
        loader.exec_module = exec_quietly
        return spec
