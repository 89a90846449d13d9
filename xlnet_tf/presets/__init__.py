"""Named presets: downloaded on first use, checked, converted with the strict converters, cached.

`resolve_preset(name_or_path)` is the entry point; `xlnet-tf presets` lists the names.
"""

from xlnet_tf.presets.download_limits import DownloadLimits
from xlnet_tf.presets.preset_cache import cache_root, is_cached, preset_cache_dir, read_manifest
from xlnet_tf.presets.preset_error import PresetError
from xlnet_tf.presets.preset_install import download_preset
from xlnet_tf.presets.preset_registry import (PresetFile, PresetSpec, get_preset_spec, preset_names,
                                              register_preset)
from xlnet_tf.presets.preset_resolver import resolve_preset

__all__ = ["DownloadLimits", "PresetError", "PresetFile", "PresetSpec", "cache_root", "download_preset",
           "get_preset_spec", "is_cached", "preset_cache_dir", "preset_names", "read_manifest",
           "register_preset", "resolve_preset"]
