"""Reading and writing preset directories: `config.json`, `model.weights.h5`, `spiece.model`."""

import os
import shutil

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
LM_HEAD_FILE = "lm_head.weights.h5"
VOCABULARY_FILE = "spiece.model"


def preset_file(preset_dir, filename, required=True):
    """The path of `filename` inside `preset_dir`; a clear error when it is required and missing."""
    if not os.path.isdir(preset_dir):
        raise FileNotFoundError(f"Preset directory not found: {preset_dir}")
    path = os.path.join(preset_dir, filename)
    if required and not os.path.exists(path):
        raise FileNotFoundError(
            f"Preset {preset_dir} has no {filename} (a preset holds {CONFIG_FILE}, {WEIGHTS_FILE} "
            f"and optionally {VOCABULARY_FILE}).")
    return path


def copy_vocabulary(source_dir_or_file, preset_dir):
    """Copies `spiece.model` into the preset when the source has one; returns whether it did."""
    source = source_dir_or_file
    if source and os.path.isdir(source):
        source = os.path.join(source, VOCABULARY_FILE)
    if source and os.path.isfile(source):
        target = os.path.join(preset_dir, VOCABULARY_FILE)
        if os.path.abspath(source) != os.path.abspath(target):
            shutil.copyfile(source, target)
        return True
    return False
