"""The one-line error of the parts that need TensorFlow, for an install without it.

The model side (layers, models, samplers, optimizers) runs on JAX and PyTorch and
imports without TensorFlow, as keras-hub does. The data side (tf.data readers,
tensorflow-text tokenizers, Beam jobs, SavedModel export, `gs://` files through
`tf.io.gfile`) needs it; without it each of those fails with one line naming
TensorFlow and the pip command, instead of a `ModuleNotFoundError` deep in a chain
of imports:

    xlnet_tf.data needs TensorFlow (pip install tensorflow): xlnet_tf.data.plm_sampling imports tensorflow

Three ways in:
- `require_tensorflow(what)`: TensorFlow, or that error about `what`;
- `from xlnet_tf.tensorflow_required import tensorflow as tf` in a data-side module the model
  side imports (a preprocessor named by a task model): the real module when installed,
  otherwise a stand-in whose first attribute use raises the error naming that module;
- `install_import_errors()` (run by `import xlnet_tf` when TensorFlow is absent): importing a
  module of the package that imports TensorFlow raises the error naming that module.

Example:
>>> from xlnet_tf.tensorflow_required import require_tensorflow
>>> tf = require_tensorflow("Reading gs://bucket/file")  # TensorFlow, or the one-line error
"""

import importlib.util
import sys
import types

# Top-level modules of TensorFlow's distributions -> what pip installs them.
_DISTRIBUTIONS = {"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text",
                  "tensorflow_datasets": "tensorflow-datasets"}
_NAMES = {"tensorflow": "TensorFlow", "tensorflow_text": "TensorFlow Text",
          "tensorflow_datasets": "TensorFlow Datasets"}

_available = None


class TensorFlowRequiredError(ImportError):
    """A part of xlnet_tf that needs TensorFlow was used where TensorFlow is not installed.

    Args:
        what: what needs it (a module name, or an action such as `"Reading gs://b/f"`).
        detail: why, or what used it; appended after a colon.
        module: the missing top-level module (`"tensorflow"`, `"tensorflow_text"`).

    Example:
    >>> str(TensorFlowRequiredError("xlnet_tf.data", "xlnet_tf.data.pretraining imports tensorflow"))
    'xlnet_tf.data needs TensorFlow (pip install tensorflow): xlnet_tf.data.pretraining imports tensorflow'
    """

    def __init__(self, what, detail="", module="tensorflow"):
        self.what, self.detail, self.missing = what, detail, module
        message = f"{what} needs {_NAMES[module]} (pip install {_DISTRIBUTIONS[module]})"
        super().__init__(f"{message}: {detail}" if detail else message, name=module)


def tensorflow_available():
    """Whether TensorFlow can be imported here (looked up once, without importing it)."""
    global _available
    if _available is None:
        try:
            _available = "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None
        except (ImportError, ValueError):  # a finder refusing it counts as absent
            _available = False
    return _available


def require_tensorflow(what):
    """TensorFlow, imported; `TensorFlowRequiredError` about `what` when it is not installed.

    Args:
        what: what needs it, the start of the message (e.g. `"Reading gs://bucket/config.json"`).
    """
    try:
        import tensorflow  # import time: only the data side and non-local paths load TensorFlow
    except ImportError as error:
        raise TensorFlowRequiredError(what, str(error)) from None
    return tensorflow


class _MissingTensorFlow(types.ModuleType):
    """Stands for `tensorflow` where it is not installed; the first attribute used raises the one-line error."""

    def __getattr__(self, name):
        if name.startswith("__"):  # introspection (doctest, inspect, copy) asks for dunders: not a use
            raise AttributeError(name)
        user = sys._getframe(1).f_globals.get("__name__", "this code")
        raise TensorFlowRequiredError(user, f"it uses tf.{name}")


def __getattr__(name):
    # `from xlnet_tf.tensorflow_required import tensorflow as tf`: resolved on that import, so this
    # module stays light for the modules that only call `require_tensorflow` on a non-local path.
    if name != "tensorflow":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not tensorflow_available():
        return _MissingTensorFlow("tensorflow")
    import tensorflow  # import time: resolved on first use of this attribute, by data-side modules

    return tensorflow


class _ImportErrorFinder:
    """Meta path finder: a package module that fails on a missing TensorFlow raises the one-line error instead.

    It finds nothing itself: it asks the finders after it for the spec of an `xlnet_tf.*`
    module and wraps that spec's own loader (one loader object per spec), so the module
    loads exactly as without it.
    """

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("xlnet_tf."):
            return None
        after = sys.meta_path[sys.meta_path.index(self) + 1:] if self in sys.meta_path else []
        for finder in after:
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_naming_tensorflow(module):
            try:
                exec_module(module)
            except TensorFlowRequiredError as error:  # raised further down: name the module imported here
                raise TensorFlowRequiredError(fullname, error.detail, error.missing) from None
            except ImportError as error:
                missing = (error.name or "").split(".")[0]
                if missing not in _DISTRIBUTIONS:
                    raise
                raise TensorFlowRequiredError(fullname, f"{fullname} imports {error.name}", missing) from None

        loader.exec_module = exec_naming_tensorflow
        return spec


def install_import_errors():
    """Makes imports of package modules that need TensorFlow raise the one-line error (idempotent)."""
    if not any(isinstance(finder, _ImportErrorFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ImportErrorFinder())
