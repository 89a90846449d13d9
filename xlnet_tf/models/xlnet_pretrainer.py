"""XLNet with its language-model head, for permutation-LM pretraining."""

import os

import h5py
import keras
import numpy as np
from keras import ops

from xlnet_tf.models import preset_io
from xlnet_tf.models.xlnet_backbone import OPTIONAL_INPUTS, REQUIRED_INPUTS, XLNetBackbone

BACKBONE_INPUTS = REQUIRED_INPUTS + OPTIONAL_INPUTS
TARGET_KEYS = ("target_ids", "target_mask")


class XLNetPretrainer(keras.Model):
    """`XLNetBackbone` plus the LM head: logits tied to the word embedding, plus an output bias.

    The logits come from the query stream when `target_mapping` is given
    (`[B, P, V]`, one row per prediction), otherwise from the content stream
    (`[B, L, V]`). They are float32 under any dtype policy.

    Training: `fit` takes the batches of `xlnet_tf.data.pretraining_dataset`
    (dicts that also carry `target_ids [B, P]` and `target_mask [B, P]`); the
    loss is the cross-entropy averaged over real targets (`target_mask`).

    Args:
        backbone: an `XLNetBackbone`.

    Call arguments:
        inputs: the backbone's input dict; `target_ids`/`target_mask` are accepted and ignored.
        training: Python bool.

    Returns:
        The backbone's output dict plus `logits`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf.config import XLNetConfig
    >>> config = XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2, head_dim=4,
    ...                      hidden_dim=8, intermediate_dim=16)
    >>> pretrainer = XLNetPretrainer(XLNetBackbone(config))
    >>> batch = {"token_ids": np.ones((2, 5), "int32"), "segment_ids": np.zeros((2, 5), "int32"),
    ...          "padding_mask": np.ones((2, 5), "int32"),
    ...          "target_mapping": np.eye(5, dtype="float32")[None, :3].repeat(2, 0)}
    >>> pretrainer(batch)["logits"].shape
    TensorShape([2, 3, 50])
    """

    def __init__(self, backbone, **kwargs):
        if "dtype" not in kwargs:
            kwargs["dtype"] = backbone.dtype_policy
        kwargs.setdefault("name", "xlnet_pretrainer")
        super().__init__(**kwargs)
        self.backbone = backbone
        self.build()

    def build(self, input_shape=None):
        self.lm_bias = self.add_weight(
            name="lm_bias", shape=(self.backbone.config.vocabulary_size,), initializer="zeros")
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict):
            raise TypeError(f"XLNetPretrainer expects a dict of inputs, got {type(inputs).__name__}.")
        unknown = sorted(set(inputs) - set(BACKBONE_INPUTS) - set(TARGET_KEYS))
        if unknown:
            raise ValueError(f"XLNetPretrainer: unknown input key(s) {unknown}; allowed: "
                             f"{list(BACKBONE_INPUTS + TARGET_KEYS)}.")
        outputs = dict(self.backbone({k: v for k, v in inputs.items() if k in BACKBONE_INPUTS},
                                     training=training))
        hidden = outputs.get("query_output", outputs["sequence_output"])
        embeddings = ops.cast(self.backbone.token_embedding.embeddings, hidden.dtype)
        logits = ops.einsum("bph,vh->bpv", hidden, embeddings)  # [B, P, V]
        outputs["logits"] = ops.cast(logits, "float32") + ops.cast(self.lm_bias, "float32")
        return outputs

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Masked cross-entropy over predicted tokens, averaged over real targets."""
        if y is None:
            y = {k: x[k] for k in TARGET_KEYS if k in x}
        if isinstance(y, dict):
            target_ids, target_mask = y["target_ids"], y.get("target_mask")
        else:
            target_ids, target_mask = y, sample_weight
        logits = y_pred["logits"]
        per_token = keras.losses.sparse_categorical_crossentropy(
            ops.cast(target_ids, "int32"), logits, from_logits=True)  # [B, P]
        if target_mask is None:
            target_mask = ops.ones_like(per_token)
        target_mask = ops.cast(target_mask, "float32")
        loss = ops.sum(per_token * target_mask) / ops.maximum(ops.sum(target_mask), 1.0)
        losses = self.losses
        if losses:
            loss = loss + ops.sum(ops.stack([ops.cast(l, "float32") for l in losses]))
        return loss

    def get_config(self):
        return {"backbone": keras.saving.serialize_keras_object(self.backbone),
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        backbone = keras.saving.deserialize_keras_object(
            config.pop("backbone"), custom_objects={"XLNetBackbone": XLNetBackbone})
        return cls(backbone, **config)

    def save_to_preset(self, preset_dir, vocabulary=None):
        """Writes the backbone preset plus `lm_head.weights.h5` holding the output bias."""
        self.backbone.save_to_preset(preset_dir, vocabulary=vocabulary)
        with h5py.File(os.path.join(preset_dir, preset_io.LM_HEAD_FILE), "w") as f:
            f.create_dataset("lm_bias", data=np.asarray(keras.ops.convert_to_numpy(self.lm_bias)))

    @classmethod
    def from_preset(cls, preset_dir, dtype=None, load_weights=True, **config_overrides):
        """Loads backbone and LM bias; a preset without `lm_head.weights.h5` gets a zero bias."""
        backbone = XLNetBackbone.from_preset(
            preset_dir, dtype=dtype, load_weights=load_weights, **config_overrides)
        pretrainer = cls(backbone)
        head_path = os.path.join(preset_dir, preset_io.LM_HEAD_FILE)
        if load_weights and os.path.exists(head_path):
            with h5py.File(head_path, "r") as f:
                bias = np.asarray(f["lm_bias"])
            if bias.shape != tuple(pretrainer.lm_bias.shape):
                raise ValueError(f"{head_path}: lm_bias has shape {bias.shape}, the model expects "
                                 f"{tuple(pretrainer.lm_bias.shape)}.")
            pretrainer.lm_bias.assign(bias)
        return pretrainer
