"""Reading and writing preset directories, in keras-hub's layout.

The layout written everywhere (`XLNetBackbone`, `XLNetPretrainer` and the task
models' `save_to_preset`, the converters, the named-preset cache, the
pretraining export, `xlnet-tf finetune`'s `final/`) is keras-hub's, so
`keras_hub.upload_preset` and keras-hub's loaders take it:

- `config.json`: the serialized `XLNetBackbone` (`{"module", "class_name", "config":
  {"config": <XLNetConfig dict>, ...}, "registered_name": "xlnet_tf>XLNetBackbone"}`);
- `model.weights.h5`: the backbone's weights; `metadata.json`: versions, parameter count;
- `tokenizer.json` + `assets/tokenizer/vocabulary.spm`: the serialized `XLNetTokenizer`
  (vocabulary as an asset, not inline) when the vocabulary is known;
- tasks: `task.json` (the serialized task model, backbone and preprocessor inside),
  `task.weights.h5` (the head only, backbone layers skipped, as keras-hub's
  `save_task_weights`), `preprocessor.json` (the serialized task preprocessor);
- extra files keras-hub ignores: `lm_head.weights.h5` (the pretrainer's LM output
  bias), `spiece.model` (the same vocabulary bytes, for the tools that take a
  vocabulary path: `prepare-pretraining --vocab`, `data.vocabulary`) and, in a
  fine-tuned task preset, `preprocessing.json` (the serving metadata: task type,
  text fields, label names, SQuAD `null_score_threshold`, ...).

Every file of a preset is written atomically (`xlnet_tf.storage.atomic_files`):
an interrupted save leaves each file either complete or as before, never a
truncated `model.weights.h5` that a later `from_preset` would choke on. Paths go
through `tf.io.gfile`, so a preset may live on `gs://`; without TensorFlow (JAX or
PyTorch alone) local presets are read with plain file I/O (`xlnet_tf.storage.atomic_files`).

Like keras-hub's `preset_utils`, this module sits below the models: it imports nothing
from the models, the preprocessors or the runs, so each of them imports it at the top.
"""

import dataclasses
import datetime
import importlib
import io
import os
import tempfile

import h5py
import keras
import keras_hub
import numpy as np

from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_names
from xlnet_tf.formats.preset_files import BACKBONE_REGISTERED_NAME
from xlnet_tf.formats.preset_files import CONFIG_FILE
from xlnet_tf.formats.preset_files import KERAS_HUB_VOCABULARY_FILE
from xlnet_tf.formats.preset_files import METADATA_FILE
from xlnet_tf.formats.preset_files import TASK_CONFIG_FILE
from xlnet_tf.formats.preset_files import MODEL_WEIGHTS_FILE
from xlnet_tf.formats.preset_files import TOKENIZER_CONFIG_FILE
from xlnet_tf.formats.preset_files import TOKENIZER_REGISTERED_NAME
from xlnet_tf.formats.preset_files import VOCABULARY_FILE


def exists(path):
    """Whether `path` exists, on any `tf.io.gfile` filesystem (local, `gs://`, `ram://`)."""
    return atomic_files.gfile(path).exists(str(path))


def read_arrays(path):
    """The named arrays of an HDF5 file written by `write_arrays`, read through `tf.io.gfile`."""
    with atomic_files.gfile(path).GFile(str(path), "rb") as raw, h5py.File(io.BytesIO(raw.read()), "r") as f:
        return {name: np.asarray(f[name]) for name in f.keys()}


def make_preset_dir(preset_dir):
    """Creates `preset_dir` (and parents) if needed; returns it."""
    atomic_files.gfile(preset_dir).makedirs(preset_dir)
    return preset_dir


def write_arrays(path, arrays):
    """Writes named numpy arrays as HDF5 datasets to `path`, atomically (e.g. the LM head bias)."""
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
    return atomic_files.write_bytes(path, buffer.getvalue())


# ---------------------------------------------------------------- reading any preset
# Schemes whose files keras-hub's `get_file` downloads into a local cache.
HUB_SCHEMES = ("hf://", "kaggle://", "modelscope://")


def resolve(preset):
    """A preset name, directory or handle -> what the readers below take.

    Named presets (`xlnet-tf presets`) are downloaded and converted on first use
    by the resolver of `xlnet_tf.presets` (an unknown name is a `PresetError`
    listing the known ones); `hf://`, `kaggle://`, `gs://`, `ram://` come back
    unchanged.
    """
    if not isinstance(preset, (str, os.PathLike)):
        raise TypeError(f"A preset must be a name, a directory or a handle, got {type(preset).__name__}.")
    return preset_names.named_preset_resolver()(preset)


def fetch(preset, filename, required=True):
    """A readable path of `filename` of `preset`, or None when absent and not `required`.

    `hf://`, `kaggle://` and `modelscope://` files are downloaded (and cached) by
    the hub's own client (`hub_file`); every other location (local, `gs://`, `ram://`)
    is read in place through `tf.io.gfile`.
    """
    preset = os.fspath(preset)
    if preset.startswith(HUB_SCHEMES):
        try:
            return hub_file(preset, filename)
        except FileNotFoundError:
            if required:
                raise FileNotFoundError(f"Preset {preset} has no {filename}.") from None
            return None
    path = os.path.join(preset, filename)
    if exists(path):
        return path
    if required:
        if not atomic_files.gfile(preset).isdir(preset):
            raise FileNotFoundError(f"Preset directory not found: {preset}")
        what = "not a preset directory" if filename == CONFIG_FILE else "incomplete preset"
        raise FileNotFoundError(
            f"Preset {preset} has no {filename}: {what} (a preset holds {CONFIG_FILE}, {MODEL_WEIGHTS_FILE} "
            f"and optionally {VOCABULARY_FILE}).")
    return None


def hub_file(handle, filename):
    """The local path of `filename` of a `hf://`, `kaggle://` or `modelscope://` preset, downloaded and cached.

    Each hub's client is what keras-hub's loaders call, so a preset uploaded with
    `keras_hub.upload_preset` comes back through the same cache. keras-hub's own
    `get_file` is not used: it reports a gated Kaggle file (403) as missing, which an
    optional file's probe (`fetch(..., required=False)`) would take for "absent", and it
    copies `gs://` presets into a cache it never refreshes, where this module reads them
    in place.

    Args:
        handle: `hf://org/name`, `kaggle://org/model/keras/variant[/version]` or `modelscope://org/name`.
        filename: a file of the preset (`config.json`, `model.weights.h5`, ...).

    Returns:
        The local path of the downloaded file.

    Raises:
        FileNotFoundError: the preset has no such file (the hub answered "not found").
        ImportError: the hub's client is not installed (it names the pip package).

    Example:
    >>> hub_file("hf://someone/xlnet_tiny", "config.json")  # doctest: +SKIP
    '/root/.cache/huggingface/hub/models--someone--xlnet_tiny/snapshots/.../config.json'
    """
    scheme, _, name = handle.partition("://")
    client = _HUB_CLIENTS[scheme + "://"]
    try:
        # Optional dependency: only a preset on that hub needs its client.
        module = importlib.import_module(client)
    except ImportError:
        raise ImportError(f"Loading {handle} needs the {client} package: pip install {client}") from None
    missing = f"{filename} does not exist in preset {handle}."
    if scheme == "hf":
        try:
            return module.hf_hub_download(repo_id=name, filename=filename)
        except module.errors.EntryNotFoundError:
            raise FileNotFoundError(missing) from None
    if scheme == "kaggle":
        try:
            return module.model_download(name, filename)
        except module.exceptions.KaggleApiHTTPError as error:
            if "404" in str(error):
                raise FileNotFoundError(missing) from None
            raise
        except ValueError as error:  # kagglehub checks the name against the model's file list first
            if "is not present in the model files" in str(error):
                raise FileNotFoundError(missing) from None
            raise
    path = os.path.join(module.snapshot_download(name), filename)
    if not os.path.exists(path):
        raise FileNotFoundError(missing)
    return path


# Hub scheme -> the client package that downloads its files (what keras-hub's loaders use).
_HUB_CLIENTS = {"hf://": "huggingface_hub", "kaggle://": "kagglehub", "modelscope://": "modelscope"}


def read_config_json(preset):
    """The parsed `config.json` of a preset."""
    return atomic_files.read_json(fetch(preset, CONFIG_FILE), kind="Config")


def read_backbone_config(preset):
    """The `XLNetConfig` fields (a dict) of a preset's `config.json`: what every reader of a preset's config asks.

    Args:
        preset: a preset directory (local, `gs://`, `ram://`) or a `hf://` / `kaggle://` handle.

    Raises:
        FileNotFoundError: the preset has no `config.json`.
        ValueError: `config.json` is not a serialized `XLNetBackbone`.

    Example:
    >>> XLNetConfig.from_dict(read_backbone_config("/tmp/xlnet_tiny")).num_layers  # doctest: +SKIP
    2
    """
    config_json = read_config_json(preset)
    config = backbone_config_dict(config_json, f"{preset}/{CONFIG_FILE}")
    registered = config_json.get("registered_name", "")
    if registered != BACKBONE_REGISTERED_NAME:
        raise ValueError(f"Preset {preset} holds a {config_json.get('class_name')!r} "
                         f"({registered}), not an XLNetBackbone.")
    return config


def is_keras_hub_layout(config_json):
    """Whether a parsed `config.json` is a serialized Keras object (keras-hub's `save_to_preset`)."""
    return isinstance(config_json, dict) and "registered_name" in config_json


def backbone_config_dict(config_json, source=CONFIG_FILE):
    """The `XLNetConfig` dict of a parsed `config.json` (a serialized `XLNetBackbone`).

    Raises:
        ValueError: `config_json` is not a serialized Keras object holding an `XLNetConfig`
            (e.g. an original or Hugging Face checkpoint's config, which `xlnet-tf convert` reads).
    """
    if not is_keras_hub_layout(config_json):
        raise ValueError(f"{source} is not a preset's config.json (a serialized XLNetBackbone with a "
                         "'registered_name', as save_to_preset writes); convert an original or Hugging Face "
                         "checkpoint with `xlnet-tf convert` first.")
    inner = config_json.get("config", {})
    if "config" not in inner:
        raise ValueError(f"{source} holds a {config_json.get('class_name')!r}, not an "
                         "XLNetBackbone (no XLNetConfig inside).")
    return inner["config"]


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


@dataclasses.dataclass(frozen=True)
class PresetContents:
    """What the loaders read of a preset, in one pass (`read_preset`), and hand down.

    Attributes:
        preset: the preset as given (a directory or a hub handle, already resolved).
        vocabulary: the path of its SentencePiece model (`spiece.model`, else keras-hub's
            tokenizer asset), or None when it has none.
        task_file: the path of its `task.json`, or None for a backbone (or pretraining) preset.
        task_config: the parsed `task.json` (the serialized task model), or None.
        backbone_config: the `XLNetConfig` fields (a dict) of its `config.json`.
    """

    preset: str
    vocabulary: str | None
    task_file: str | None
    task_config: dict | None
    backbone_config: dict

    @property
    def is_task_preset(self) -> bool:
        """It holds a task model (`task.json`), not a backbone alone."""
        return self.task_config is not None


def read_preset(preset, require_task=False):
    """The `PresetContents` of `preset`: its task model if any, its vocabulary and its backbone config.

    Args:
        preset: a resolved preset (`resolve`): a directory or a hub handle.
        require_task: refuse a preset without `task.json` (before reading anything else).

    Raises:
        FileNotFoundError: the preset has no `config.json` (or no `task.json` where required).
        ValueError: `config.json` is not a serialized `XLNetBackbone`.

    Example:
    >>> read_preset("/tmp/xlnet_tiny").backbone_config["num_layers"]  # doctest: +SKIP
    2
    """
    task_file = fetch(preset, TASK_CONFIG_FILE, required=False)
    if task_file is None and require_task:
        raise not_a_task_preset(preset)
    task_config = None if task_file is None else atomic_files.read_json(task_file)
    return PresetContents(preset=preset, vocabulary=vocabulary_path(preset, required=False),
                          task_file=task_file, task_config=task_config,
                          backbone_config=read_backbone_config(preset))


def preset_contents(preset, require_task=False):
    """`preset`'s `PresetContents`: read (`read_preset` of `resolve(preset)`), or handed back when already read.

    What every loader of a preset starts with, so that a caller holding the contents
    (a fine-tuning run) hands them on and nothing reads the preset's files twice.
    """
    if isinstance(preset, PresetContents):
        if require_task and not preset.is_task_preset:
            raise not_a_task_preset(preset.preset)
        return preset
    return read_preset(resolve(preset), require_task=require_task)


def not_a_task_preset(preset):
    """The error of a preset without `task.json` where a task model is required."""
    return FileNotFoundError(f"No {TASK_CONFIG_FILE} in {preset}: not a task preset directory.")


def read_bytes(path):
    with atomic_files.gfile(path).GFile(str(path), "rb") as f:
        return f.read()



def load_weights(model, path, **kwargs):
    """`model.load_weights(path, **kwargs)` for a path on any `tf.io.gfile` filesystem (copied locally first)."""
    if atomic_files.is_local(path):
        model.load_weights(path, **kwargs)
        return
    with tempfile.TemporaryDirectory() as scratch:
        local = os.path.join(scratch, os.path.basename(str(path)))
        atomic_files.gfile(path).copy(str(path), local)
        model.load_weights(local, **kwargs)


# ---------------------------------------------------------------- writing keras-hub's layout
def serialize(layer):
    """`keras.saving.serialize_keras_object(layer)` as keras-hub's preset saver writes it.

    `compile_config` / `build_config` are dropped (as keras-hub does) and every
    nested `XLNetTokenizer` gets `proto: None`: the vocabulary is the asset
    `assets/tokenizer/vocabulary.spm`, not a base64 copy inside each JSON file.
    """
    return _strip(keras.saving.serialize_keras_object(layer))


def _strip(value):
    if isinstance(value, dict):
        value = {k: _strip(v) for k, v in value.items() if k not in ("compile_config", "build_config")}
        if value.get("registered_name") == TOKENIZER_REGISTERED_NAME and isinstance(value.get("config"), dict):
            value["config"] = dict(value["config"], proto=None)
        return value
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def write_serialized(preset_dir, filename, layer):
    """Writes `serialize(layer)` to `preset_dir/filename` atomically; returns the dict written."""
    config = serialize(layer)
    atomic_files.write_json(os.path.join(preset_dir, filename), config)
    return config


def write_metadata(preset_dir, backbone):
    """`metadata.json` as keras-hub's saver writes it (versions, parameter count, date, tasks)."""
    atomic_files.write_json(os.path.join(preset_dir, METADATA_FILE), {
        "keras_version": keras.version(),
        "keras_hub_version": keras_hub.__version__,
        "parameter_count": int(backbone.count_params()),
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        "tasks": ["XLNetClassifier", "XLNetMultipleChoice", "XLNetPretrainer", "XLNetSpanLabeler",
                  "XLNetTokenClassifier"],
    })


def vocabulary_bytes(vocabulary):
    """The SentencePiece bytes of `vocabulary`: bytes, a `spiece.model` path or a directory holding one.

    Returns None when `vocabulary` is None or a directory without `spiece.model`
    (a converter's source folder may have none); a missing file is an error.
    """
    if vocabulary is None:
        return None
    if isinstance(vocabulary, (bytes, bytearray)):
        return bytes(vocabulary)
    vocabulary = os.fspath(vocabulary)
    gfile = atomic_files.gfile(vocabulary)
    if gfile.isdir(vocabulary):
        vocabulary = os.path.join(vocabulary, VOCABULARY_FILE)
        if not gfile.exists(vocabulary):
            return None
    if not gfile.exists(vocabulary):
        raise FileNotFoundError(f"Vocabulary file not found: {vocabulary}")
    return read_bytes(vocabulary)


def write_tokenizer(preset_dir, proto, tokenizer, lowercase=None):
    """Writes `tokenizer.json`, `assets/tokenizer/vocabulary.spm` and `spiece.model` atomically.

    Args:
        preset_dir: the preset directory.
        proto: the SentencePiece model bytes.
        tokenizer: the `XLNetTokenizer` whose settings (lowercasing, ...) are
            saved (`default_tokenizer()` of the caller when it has none).
        lowercase: overrides the saved `lowercase` when not None.
    """
    config = serialize(tokenizer)
    if lowercase is not None:
        config["config"]["lowercase"] = bool(lowercase)
    atomic_files.write_json(os.path.join(preset_dir, TOKENIZER_CONFIG_FILE), config)
    atomic_files.write_bytes(os.path.join(preset_dir, KERAS_HUB_VOCABULARY_FILE), proto)
    atomic_files.write_bytes(os.path.join(preset_dir, VOCABULARY_FILE), proto)
    return config


def save_weights_skipping(model, path, objects_to_skip):
    """`keras.saving.save_weights(model, path, objects_to_skip=...)`, atomically (keras-hub's task weights)."""
    return atomic_files.save_weights(_SkippingSaver(model, objects_to_skip), path)


class _SkippingSaver:
    """Gives `atomic_files.save_weights` a `save_weights(path)` that skips some objects."""

    def __init__(self, model, objects_to_skip):
        self.model, self.objects_to_skip = model, list(objects_to_skip)

    def save_weights(self, path):
        keras.saving.save_weights(self.model, path, objects_to_skip=self.objects_to_skip)
