"""Shared base of the fine-tuning task models (backbone handling, presets, `<cls>` pooling).

A task preset directory (written by `XLNetTask.save_to_preset`, read by
`XLNetTask.from_preset` and `load_task_preset`) holds:

- `config.json`: the backbone's `XLNetConfig` (same file as a backbone preset);
- `task.json`: `{"format": "xlnet_tf.task.v1", "class_name": ..., "config": {...}}` where `config`
  is the task model's `get_config()` without the backbone;
- `task.weights.h5`: every weight of the task model (backbone + head), Keras 3 format;
- `spiece.model`: the SentencePiece vocabulary when known;
- `preprocessing.json`: how raw text is packed (sequence length, special ids, ...) when known.

A plain backbone preset (`config.json` + `model.weights.h5`) is also accepted by
`from_preset`: the backbone weights are loaded and a freshly initialised head is built.
"""

import os
import re

import keras
from keras import ops

TASK_PRESET_FORMAT = "xlnet_tf.task.v1"
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
BACKBONE_CONFIG_FILE = "config.json"
BACKBONE_WEIGHTS_FILE = "model.weights.h5"
VOCABULARY_FILE = "spiece.model"
PREPROCESSING_FILE = "preprocessing.json"

# Ids of the released XLNet vocabulary.
CLS_TOKEN_ID = 3


def cls_positions(token_ids, padding_mask, cls_token_id=CLS_TOKEN_ID):
    """Index of the `<cls>` token of every row, whatever side the padding is on.

    The last real `<cls>` of a row is used (XLNet puts `<cls>` last). A row
    without any `<cls>` falls back to its last real token, which is where the
    `<cls>` sits for both left padding (`L - 1`) and right padding
    (`length - 1`); a row without any real token falls back to `L - 1`.

    Args:
        token_ids: int tensor `[B, L]`.
        padding_mask: int/bool tensor `[B, L]`, 1 = real token.
        cls_token_id: id of `<cls>`.

    Returns:
        int32 tensor `[B]`.
    """
    length = ops.shape(token_ids)[1]
    real = ops.cast(padding_mask, "bool")
    positions = ops.arange(length, dtype="int32")[None, :]  # [1, L]
    is_cls = ops.logical_and(ops.equal(token_ids, cls_token_id), real)
    last_cls = ops.max(ops.where(is_cls, positions, -1), axis=1)
    last_real = ops.max(ops.where(real, positions, -1), axis=1)
    index = ops.where(last_cls >= 0, last_cls, last_real)
    return ops.where(index >= 0, index, length - 1)


def gather_positions(sequence, index):
    """Picks `sequence[b, index[b]]` with a one-hot product (works on every device).

    Args:
        sequence: `[B, L, H]`.
        index: int `[B]`.

    Returns:
        `[B, H]`.
    """
    one_hot = ops.one_hot(index, ops.shape(sequence)[1], dtype=sequence.dtype)  # [B, L]
    return ops.einsum("blh,bl->bh", sequence, one_hot)


def finetuning_adjustments(config, keep=()):
    """The `XLNetConfig` changes that turn a pretraining configuration into a fine-tuning one.

    Pretraining presets keep the settings of permutation-LM training, which a
    task model cannot use: `bi_data` needs an even batch and only serves
    pretraining, and the task models feed no recurrence memory (the original
    fine-tuning code ran with `mem_len` 0 too). `attention_type`, `clamp_length`
    and `same_length` are kept.

    Args:
        config: the preset's `XLNetConfig`.
        keep: field names the caller sets itself (e.g. a user's explicit override),
            left out of the result.

    Returns:
        `{field: (preset value, fine-tuning value)}` for every field that changes.
    """
    wanted = {"bi_data": False, "memory_length": 0, "reuse_length": 0}
    return {field: (getattr(config, field), value) for field, value in wanted.items()
            if field not in keep and getattr(config, field) != value}


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetTask(keras.Model):
    """Base class of the XLNet task models: holds the backbone, serialises it, reads presets.

    Subclasses create their head layers in `__init__`, create their weights in
    `build_head(hidden_dim)` and end `__init__` with `self.build()`, so that a
    model is complete before any call (a `.keras` load then restores every
    weight); they implement `call` and list their own constructor arguments in
    `get_config` by extending `super().get_config()`.

    Args:
        backbone: an `xlnet_tf.models.xlnet_backbone.XLNetBackbone`.
        **kwargs: `name`, `dtype`, `trainable` of `keras.Model`.
    """

    def __init__(self, backbone, **kwargs):
        # "xlnet_classifier", not Keras' automatic "xl_net_classifier".
        kwargs.setdefault("name", "xlnet_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__[5:]).lower())
        super().__init__(**kwargs)
        self.backbone = backbone

    def backbone_inputs(self, inputs):
        """The three backbone inputs of a feature dict (other keys, e.g. labels, are dropped)."""
        missing = [k for k in ("token_ids", "segment_ids", "padding_mask") if k not in inputs]
        if missing:
            raise ValueError(
                f"{type(self).__name__} inputs are missing key(s) {missing}; got {sorted(inputs)}.")
        return {
            "token_ids": inputs["token_ids"],
            "segment_ids": inputs["segment_ids"],
            "padding_mask": inputs["padding_mask"],
        }

    def build(self, input_shape=None):
        """Creates every weight from the config alone (the inputs' shapes are not needed)."""
        if not self.backbone.built:
            self.backbone.build()
        self.build_head(self.backbone.config.hidden_dim)
        self.built = True

    def build_head(self, hidden_dim):
        """Builds the head's layers for a backbone of width `hidden_dim` (subclasses)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_head(hidden_dim).")

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        """Rebuilds the model; the backbone comes serialized (`backbone`) or, in task
        presets written before it was, as its `XLNetConfig` dict (`backbone_config`)."""
        from xlnet_tf.config import XLNetConfig
        from xlnet_tf.models.xlnet_backbone import XLNetBackbone

        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        backbone_config = config.pop("backbone_config", None)
        backbone = config.pop("backbone", None)
        if backbone is None:
            if backbone_config is None:
                raise ValueError(f"{cls.__name__}.from_config needs `backbone` (or `backbone_config`); "
                                 f"got keys {sorted(config)}.")
            backbone = XLNetBackbone(XLNetConfig.from_dict(backbone_config),
                                     dtype=config.get("dtype"))
        elif isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        return cls(backbone=backbone, **config)

    def build_with_dummy_inputs(self):
        """Creates every weight by running the model once on a tiny input."""
        self(self.dummy_inputs(), training=False)

    def dummy_inputs(self, batch_size=1, sequence_length=4):
        """A tiny valid input dict for this task (used to build weights before loading)."""
        token_ids = ops.concatenate(
            [ops.full((batch_size, sequence_length - 1), 10, dtype="int32"),
             ops.full((batch_size, 1), CLS_TOKEN_ID, dtype="int32")], axis=1)  # [B, L]
        return {
            "token_ids": token_ids,
            "segment_ids": ops.zeros((batch_size, sequence_length), dtype="int32"),
            "padding_mask": ops.ones((batch_size, sequence_length), dtype="int32"),
        }

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds the task model from a task preset or from a backbone preset.

        Args:
            preset: a directory. With `task.json` (a saved task model of this class)
                the whole model is restored and `kwargs` override its config
                (weights are then only loaded when the head's shapes still match).
                Without it, the directory is a backbone preset: the backbone is
                loaded with the fine-tuning settings (`finetuning_adjustments`:
                `bi_data` off and no recurrence memory, also when the preset
                comes from pretraining with them on) and a new head is built
                from `kwargs`.
            load_weights: load weights (False: same architecture, fresh weights).
            **kwargs: constructor arguments of the task class.

        Returns:
            A built task model.
        """
        from xlnet_tf.models import preset_io

        task_file = os.path.join(preset, TASK_CONFIG_FILE)
        if preset_io.exists(task_file):
            saved = preset_io.read_json(task_file)
            if saved.get("class_name") != cls.__name__:
                raise ValueError(f"{task_file} holds a {saved.get('class_name')!r}, "
                                 f"not a {cls.__name__}; use load_task_preset().")
            model = load_task_preset(preset, load_weights=load_weights, **kwargs)
            return model
        from xlnet_tf.config import XLNetConfig
        from xlnet_tf.models.xlnet_backbone import XLNetBackbone

        if not preset_io.exists(os.path.join(preset, BACKBONE_CONFIG_FILE)):
            raise FileNotFoundError(
                f"{preset} is not a preset directory: no {BACKBONE_CONFIG_FILE} or {TASK_CONFIG_FILE}.")
        backbone_config = XLNetConfig.from_json(os.path.join(preset, BACKBONE_CONFIG_FILE))
        adjustments = {k: new for k, (_, new) in finetuning_adjustments(backbone_config).items()}
        if load_weights:
            backbone = XLNetBackbone.from_preset(preset, **adjustments)
        else:
            backbone = XLNetBackbone(backbone_config.replace(**adjustments))
        model = cls(backbone=backbone, **kwargs)
        model.build_with_dummy_inputs()
        return model

    def save_to_preset(self, preset, vocabulary_file=None, preprocessing=None):
        """Writes a task preset directory (layout in the module docstring).

        Args:
            preset: output directory (created).
            vocabulary_file: path of `spiece.model` to copy in, if any.
            preprocessing: a JSON-serialisable dict describing the input packing
                (e.g. `{"sequence_length": 128, "text_fields": [...]}`), if any.
        """
        from xlnet_tf.models import preset_io

        # Each file atomically: an interrupted save never leaves a truncated file behind.
        preset_io.make_preset_dir(preset)
        if not self.built:
            self.build_with_dummy_inputs()
        preset_io.write_json(os.path.join(preset, BACKBONE_CONFIG_FILE), self.backbone.config.to_dict())
        config = self.get_config()
        config.pop("backbone", None)  # config.json holds the backbone
        preset_io.write_json(os.path.join(preset, TASK_CONFIG_FILE),
                             {"format": TASK_PRESET_FORMAT, "class_name": type(self).__name__,
                              "config": config})
        preset_io.save_weights(self, os.path.join(preset, TASK_WEIGHTS_FILE))
        if vocabulary_file and not preset_io.copy_vocabulary(vocabulary_file, preset):
            raise FileNotFoundError(f"Vocabulary file not found: {vocabulary_file}")
        if preprocessing is not None:
            preset_io.write_json(os.path.join(preset, PREPROCESSING_FILE), preprocessing)


def task_classes():
    """Name -> class of every task model (imported lazily to keep imports light)."""
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
    from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

    return {c.__name__: c for c in (XLNetClassifier, XLNetSpanLabeler,
                                     XLNetMultipleChoice, XLNetTokenClassifier)}


def load_task_preset(preset, load_weights=True, **overrides):
    """Rebuilds any saved task model from a task preset directory.

    Args:
        preset: directory written by `XLNetTask.save_to_preset`.
        load_weights: restore `task.weights.h5`.
        **overrides: constructor arguments replacing the saved ones (e.g. `dropout=0.0`).

    Returns:
        The task model (built), an instance of the class named in `task.json`.
    """
    from xlnet_tf.config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    from xlnet_tf.models import preset_io

    task_file = os.path.join(preset, TASK_CONFIG_FILE)
    if not preset_io.exists(task_file):
        raise FileNotFoundError(f"No {TASK_CONFIG_FILE} in {preset}: not a task preset directory.")
    saved = preset_io.read_json(task_file)
    if saved.get("format") != TASK_PRESET_FORMAT:
        raise ValueError(f"{task_file}: format {saved.get('format')!r}, expected {TASK_PRESET_FORMAT!r}.")
    classes = task_classes()
    name = saved.get("class_name")
    if name not in classes:
        raise ValueError(f"{task_file}: unknown task class {name!r}; known: {sorted(classes)}.")
    config = dict(saved["config"])
    # The backbone comes from config.json (presets may hold it serialized too).
    config.pop("backbone", None)
    config.pop("backbone_config", None)
    config.update(overrides)
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    backbone = XLNetBackbone(XLNetConfig.from_json(os.path.join(preset, BACKBONE_CONFIG_FILE)),
                             dtype=config.get("dtype"))
    model = classes[name](backbone=backbone, **config)
    model.build_with_dummy_inputs()
    if load_weights:
        weights = os.path.join(preset, TASK_WEIGHTS_FILE)
        if not preset_io.exists(weights):
            raise FileNotFoundError(f"Task weights not found: {weights}")
        model.load_weights(weights)
    return model
