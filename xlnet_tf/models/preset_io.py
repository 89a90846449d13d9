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
