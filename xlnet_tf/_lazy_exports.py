"""Package attributes imported on first use (PEP 562), so importing a package stays light.

Beam workers import `xlnet_tf.text_normalization` and
`xlnet_tf.preprocessing.digit_comma_split`; packages that imported their Keras
classes eagerly would load TensorFlow and Keras into every worker process.
"""

import importlib
import sys


def lazy_exports(module_name, exports, extra=()):
    """`(__all__, __getattr__, __dir__)` for the package `module_name`.

    Args:
        module_name: the package's `__name__`.
        exports: public name -> module that defines it.
        extra: names the package defines itself (listed in `__all__`).

    Returns:
        The package's `__all__` and its module-level `__getattr__` and `__dir__`.

    Example:
    >>> __all__, __getattr__, __dir__ = lazy_exports(
    ...     __name__, {"XLNetPacker": "xlnet_tf.preprocessing.xlnet_packer"})  # doctest: +SKIP
    """
    names = sorted(exports) + list(extra)

    def __getattr__(name):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            setattr(sys.modules[module_name], name, value)  # later look-ups skip this function
            return value
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    def __dir__():
        return names

    return names, __getattr__, __dir__
