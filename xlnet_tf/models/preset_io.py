"""Reading and writing preset directories: `config.json`, `model.weights.h5`, `spiece.model`.

Every file of a preset is written atomically (`xlnet_tf.storage.atomic_files`):
an interrupted save leaves each file either complete or as before, never a
truncated `model.weights.h5` that a later `from_preset` would choke on. Paths go
through `tf.io.gfile`, so a preset may live on `gs://`.
"""

import io
import os

from xlnet_tf.storage import atomic_files

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
LM_HEAD_FILE = "lm_head.weights.h5"
VOCABULARY_FILE = "spiece.model"


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def preset_file(preset_dir, filename, required=True):
    """The path of `filename` inside `preset_dir`; a clear error when it is required and missing."""
    gfile = _gfile()
    if not gfile.isdir(preset_dir):
        raise FileNotFoundError(f"Preset directory not found: {preset_dir}")
    path = os.path.join(preset_dir, filename)
    if required and not gfile.exists(path):
        raise FileNotFoundError(
            f"Preset {preset_dir} has no {filename} (a preset holds {CONFIG_FILE}, {WEIGHTS_FILE} "
            f"and optionally {VOCABULARY_FILE}).")
    return path


def exists(path):
    """Whether `path` exists, on any `tf.io.gfile` filesystem (local, `gs://`, `ram://`)."""
    return _gfile().exists(str(path))


def read_json(path):
    """The JSON value of a preset file, read through `tf.io.gfile`; a clear error when it is not JSON."""
    import json

    with _gfile().GFile(str(path), "r") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error


def read_arrays(path):
    """The named arrays of an HDF5 file written by `write_arrays`, read through `tf.io.gfile`."""
    import h5py
    import numpy as np

    with _gfile().GFile(str(path), "rb") as raw, h5py.File(io.BytesIO(raw.read()), "r") as f:
        return {name: np.asarray(f[name]) for name in f.keys()}


def make_preset_dir(preset_dir):
    """Creates `preset_dir` (and parents) if needed; returns it."""
    _gfile().makedirs(preset_dir)
    return preset_dir


def write_json(path, obj):
    """Writes a preset's JSON file (`config.json`, `task.json`, ...) atomically."""
    return atomic_files.write_json(path, obj)


def save_weights(model, path):
    """`model.save_weights(path)` atomically (complete file or the previous one)."""
    return atomic_files.save_weights(model, path)


def write_arrays(path, arrays):
    """Writes named numpy arrays as HDF5 datasets to `path`, atomically (e.g. the LM head bias)."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
    return atomic_files.write_bytes(path, buffer.getvalue())


def copy_vocabulary(source_dir_or_file, preset_dir):
    """Copies `spiece.model` into the preset when the source has one; returns whether it did."""
    gfile = _gfile()
    source = source_dir_or_file
    if source and gfile.isdir(source):
        source = os.path.join(source, VOCABULARY_FILE)
    if source and gfile.exists(source) and not gfile.isdir(source):
        target = os.path.join(preset_dir, VOCABULARY_FILE)
        if _same_path(source, target):
            return True
        atomic_files.copy_file(source, target)
        return True
    return False


def _same_path(a, b):
    if atomic_files.is_local(a) and atomic_files.is_local(b):
        return os.path.abspath(a) == os.path.abspath(b)
    return str(a).rstrip("/") == str(b).rstrip("/")


# ---------------------------------------------------------------- reading any preset
# Schemes whose files keras-hub's `get_file` downloads into a local cache.
HUB_SCHEMES = ("hf://", "kaggle://", "modelscope://")


def resolve(preset):
    """A preset name, directory or handle -> what the readers below take.

    Named presets (`xlnet-tf presets`) are downloaded and converted on first use
    by `xlnet_tf.presets.resolve_preset` (an unknown name is a `PresetError`
    listing the known ones); `hf://`, `kaggle://`, `gs://`, `ram://` come back
    unchanged.
    """
    # Imported here: xlnet_tf.presets imports the converters, which import the models.
    from xlnet_tf.presets import resolve_preset

    if not isinstance(preset, (str, os.PathLike)):
        raise TypeError(f"A preset must be a name, a directory or a handle, got {type(preset).__name__}.")
    return resolve_preset(preset)


def fetch(preset, filename, required=True):
    """A readable path of `filename` of `preset`, or None when absent and not `required`.

    `hf://`, `kaggle://` and `modelscope://` files are downloaded (and cached) by
    keras-hub's `get_file`; every other location (local, `gs://`, `ram://`) is
    read in place through `tf.io.gfile`.
    """
    preset = os.fspath(preset)
    if preset.startswith(HUB_SCHEMES):
        from keras_hub.src.utils.preset_utils import get_file

        try:
            return get_file(preset, filename)
        except FileNotFoundError:
            if required:
                raise FileNotFoundError(f"Preset {preset} has no {filename}.") from None
            return None
    path = os.path.join(preset, filename)
    if exists(path):
        return path
    if required:
        if not _gfile().isdir(preset):
            raise FileNotFoundError(f"Preset directory not found: {preset}")
        what = "not a preset directory" if filename == CONFIG_FILE else "incomplete preset"
        raise FileNotFoundError(
            f"Preset {preset} has no {filename}: {what} (a preset holds {CONFIG_FILE}, {WEIGHTS_FILE} "
            f"and optionally {VOCABULARY_FILE}).")
    return None


def read_config_json(preset):
    """The parsed `config.json` of a preset (either layout)."""
    return read_json(fetch(preset, CONFIG_FILE))


def is_keras_hub_layout(config_json):
    """Whether a parsed `config.json` is a serialized Keras object (keras-hub's `save_to_preset`)."""
    return isinstance(config_json, dict) and "registered_name" in config_json


def backbone_config_dict(config_json):
    """The `XLNetConfig` dict of a parsed `config.json`, in either layout."""
    if is_keras_hub_layout(config_json):
        inner = config_json.get("config", {})
        if "config" not in inner:
            raise ValueError(f"config.json holds a {config_json.get('class_name')!r}, not an "
                             "XLNetBackbone (no XLNetConfig inside).")
        return inner["config"]
    return config_json


def read_backbone_config(preset):
    """The `XLNetConfig` of a preset, whatever its layout (project's or keras-hub's)."""
    from xlnet_tf.config import XLNetConfig

    return XLNetConfig.from_any_dict(backbone_config_dict(read_config_json(preset)))


def vocabulary_path(preset, required=True):
    """The SentencePiece model of a preset: `spiece.model`, else keras-hub's tokenizer asset."""
    for name in (VOCABULARY_FILE, KERAS_HUB_VOCABULARY_FILE):
        path = fetch(preset, name, required=False)
        if path is not None:
            return path
    if required:
        raise FileNotFoundError(
            f"Preset {preset} has no vocabulary: neither {VOCABULARY_FILE} nor "
            f"{KERAS_HUB_VOCABULARY_FILE}.")
    return None


def read_bytes(path):
    with _gfile().GFile(str(path), "rb") as f:
        return f.read()


KERAS_HUB_VOCABULARY_FILE = "assets/tokenizer/vocabulary.spm"


def load_weights(model, path):
    """`model.load_weights(path)` for a path on any `tf.io.gfile` filesystem (copied locally first)."""
    if atomic_files.is_local(path):
        model.load_weights(path)
        return
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        local = os.path.join(scratch, os.path.basename(str(path)))
        _gfile().copy(str(path), local)
        model.load_weights(local)
