"""`resolve_preset`: a preset name or path -> a local (or remote) preset directory."""

import os

from xlnet_tf.presets import preset_cache
from xlnet_tf.presets.preset_error import PresetError
from xlnet_tf.presets import preset_registry
from xlnet_tf.presets.preset_install import download_preset


def resolve_preset(name_or_path, progress=None):
    """The preset directory that `name_or_path` stands for, downloading a named preset on first use.

    - an existing directory (after `~` expansion) is returned as is (a cache entry, one
      with `preset_manifest.json`, once its files match the manifest);
    - a handle or remote path with a scheme (`hf://`, `kaggle://`, `gs://`, ...)
      is returned unchanged for the loader that understands it;
    - a registered name (`xlnet-tf presets`) gives its cache directory,
      downloaded, checked and converted on first use (`download_preset`).

    Args:
        name_or_path: a preset name, a directory, or a `scheme://` handle.
        progress: optional callable `(file_name, received_bytes, total_bytes_or_None)` for downloads.

    Returns:
        A directory path (or the unchanged handle).

    Raises:
        PresetError: an unknown name (the message lists the known names), a
            failed download, check or conversion, or a damaged cache entry (named, with the fix).

    Example:
    >>> from xlnet_tf import XLNetPretrainer
    >>> from xlnet_tf.presets import resolve_preset
    >>> pretrainer = XLNetPretrainer.from_preset(resolve_preset("xlnet_base_cased"))
    """
    value = os.fspath(name_or_path)
    if "://" in value:
        return value
    expanded = os.path.expanduser(value)
    if os.path.isdir(expanded):
        if os.path.lexists(os.path.join(expanded, preset_cache.MANIFEST_FILE)):
            # A cache entry named by its path is checked as its name would be.
            problem = preset_cache.entry_problem(expanded)
            if problem:
                name = os.path.basename(os.path.normpath(expanded))
                raise PresetError(preset_cache.damaged_entry_message(name, expanded, problem))
        return expanded
    if value in preset_registry.PRESETS:
        return download_preset(value, progress=progress)
    raise PresetError(preset_registry.unknown_preset_message(value))
