"""The slot through which the preset reader gets the resolver of the named presets.

The named presets (`xlnet_tf.presets`) download and convert checkpoints into models, so
they sit above the models and the preset reader (`preset_io`) below them. The reader
therefore never imports them: the package (`xlnet_tf/__init__.py`) hands their resolver
in with `set_named_preset_resolver` when it is imported. Light on purpose (no TensorFlow).

Example:
>>> import xlnet_tf
>>> named_preset_resolver()("hf://someone/xlnet_tiny")  # a handle comes back unchanged
'hf://someone/xlnet_tiny'
"""

_resolver = None


def set_named_preset_resolver(resolver):
    """Makes `resolver(name_or_path) -> directory or handle` the resolver of preset names."""
    global _resolver
    _resolver = resolver


def named_preset_resolver():
    """The resolver of preset names.

    Raises:
        RuntimeError: none was set (importing the `xlnet_tf` package sets it).
    """
    if _resolver is None:
        raise RuntimeError("No preset name resolver is set: import xlnet_tf, which sets it.")
    return _resolver
