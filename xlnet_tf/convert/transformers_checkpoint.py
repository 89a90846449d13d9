"""Hugging Face `save_pretrained` XLNet directories -> `XLNetPretrainer`, without torch."""

import json
import os

import numpy as np
from safetensors.numpy import load_file

from xlnet_tf.formats.preset_files import TRANSFORMERS_CONFIG_FILE
from xlnet_tf.formats.preset_files import TRANSFORMERS_WEIGHTS_FILE
from xlnet_tf.formats.preset_files import TRANSFORMERS_WEIGHTS_INDEX_FILE
from xlnet_tf.formats.preset_files import VOCABULARY_FILE
from xlnet_tf.convert.checkpoint_config import read_checkpoint_config
from xlnet_tf.convert.block_weight_names import block_weight_names
from xlnet_tf.convert.checkpoint_mapping import CheckpointMapping
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

_BIASES = (("r_w_bias", "content_attention_bias"), ("r_r_bias", "positional_attention_bias"),
           ("r_s_bias", "segment_attention_bias"))
# The feed-forward layers' torch `Linear` weights in a layer scope (see `block_weight_names`).
_TORCH_LINEAR_WEIGHTS = (".ff.layer_1.weight", ".ff.layer_2.weight")


def _load_file(path):
    """One safetensors file; a truncated or corrupt file is a `ConversionError` naming it."""
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: file not found (listed in model.safetensors.index.json).")
    try:
        return load_file(path)
    except Exception as e:  # safetensors raises its own SafetensorError (and OSError, ValueError)
        raise ConversionError(f"{path}: not a readable safetensors file (truncated or corrupt?): "
                              f"{type(e).__name__}: {e}") from e


def read_safetensors(directory):
    """All tensors of `model.safetensors` (or its shards) as numpy arrays, read without torch."""
    single = os.path.join(directory, TRANSFORMERS_WEIGHTS_FILE)
    index = os.path.join(directory, TRANSFORMERS_WEIGHTS_INDEX_FILE)
    if os.path.exists(single):
        return _load_file(single)
    if os.path.exists(index):
        try:
            with open(index) as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConversionError(f"{index}: not a safetensors index (expected JSON with a "
                                  f"'weight_map' object): {type(e).__name__}: {e}") from e
        arrays = {}
        for shard in shards:
            arrays.update(_load_file(os.path.join(directory, shard)))
        return arrays
    present = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    raise ConversionError(
        f"{directory}: no model.safetensors (or model.safetensors.index.json); found {present}. "
        "Re-save the model with save_pretrained(..., safe_serialization=True).")


def convert_transformers_checkpoint(input_dir, dtype=None):
    """Builds an `XLNetPretrainer` from a Hugging Face XLNet `save_pretrained` directory.

    Reads `config.json` and `model.safetensors` with numpy only. Hugging Face
    keeps `r_w/r_r/r_s` biases in every layer; with `untie_r: false` they must be
    identical across layers (they become one shared set), otherwise the
    conversion fails. `lm_loss.weight`, when stored, must equal the word
    embedding (the head is tied). Linear weights are transposed to Keras kernels.

    Args:
        input_dir: directory with `config.json` and `model.safetensors` (and
            optionally `spiece.model`).
        dtype: dtype policy of the new model.

    Returns:
        `(pretrainer, mapping, vocabulary_path_or_None)`.

    Raises:
        ConversionError: naming every missing, unused or mis-shaped variable.

    Example:
    >>> from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
    >>> pretrainer, _, _ = convert_transformers_checkpoint("xlnet-base-cased")  # doctest: +SKIP
    """
    config_path = os.path.join(input_dir, TRANSFORMERS_CONFIG_FILE)
    if not os.path.exists(config_path):
        raise ConversionError(f"{input_dir}: no {TRANSFORMERS_CONFIG_FILE} (expected a save_pretrained directory).")
    try:
        config = read_checkpoint_config(config_path)
    except (ValueError, TypeError, KeyError, OSError) as e:
        raise ConversionError(f"{config_path}: not a readable XLNet config: {e}") from e
    arrays = read_safetensors(input_dir)
    # XLNetLMHeadModel stores "transformer.*"; a bare XLNetModel stores the same names unprefixed.
    prefix = "transformer." if "transformer.word_embedding.weight" in arrays else ""

    pretrainer = XLNetPretrainer(XLNetBackbone(config, dtype=dtype))
    mapping = CheckpointMapping(arrays, source=os.path.join(input_dir, TRANSFORMERS_WEIGHTS_FILE))
    _assign(mapping, pretrainer, prefix)
    mapping.finish(pretrainer)
    vocabulary = os.path.join(input_dir, VOCABULARY_FILE)
    return pretrainer, mapping, vocabulary if os.path.exists(vocabulary) else None


def _assign(mapping, pretrainer, prefix):
    backbone = pretrainer.backbone
    config = backbone.config
    embedding = mapping.take(prefix + "word_embedding.weight")
    mapping.assign(backbone.token_embedding.embeddings, embedding, prefix + "word_embedding.weight")
    mapping.assign(backbone.mask_embedding, mapping.take(prefix + "mask_emb"), prefix + "mask_emb")
    layers = [f"{prefix}layer.{i}.rel_attn." for i in range(config.num_layers)]

    heads = (config.num_heads, config.head_dim)
    seg_names = [layer + "seg_embed" for layer in layers]
    seg = _stack(mapping, seg_names, backbone.segment_embedding, (2,) + heads)
    mapping.assign(backbone.segment_embedding, seg, f"{prefix}layer.*.rel_attn.seg_embed")
    for hf_name, attribute in _BIASES:
        names = [layer + hf_name for layer in layers]
        variable = getattr(backbone, attribute)
        stacked = _stack(mapping, names, variable, heads)
        if stacked is not None and not config.untie_relative_bias:
            spread = float(np.max(np.abs(stacked - stacked[0:1])))
            if spread > 0:
                mapping.errors.append(
                    f"config.json has untie_r false but {prefix}layer.*.rel_attn.{hf_name} differ across "
                    f"layers (max abs difference {spread:.3g}); tied conversion needs identical biases")
                stacked = None
            else:
                stacked = stacked[0]  # [N, D]
        mapping.assign(variable, stacked, f"{prefix}layer.*.rel_attn.{hf_name}")

    for i, block in enumerate(backbone.blocks):
        for variable, name in block_weight_names(block, "transformers"):
            name = f"{prefix}layer.{i}.{name}"
            value = mapping.take(name)
            if value is not None and name.endswith(_TORCH_LINEAR_WEIGHTS):
                # A torch Linear weight is [out, in]: the transpose of the Keras kernel.
                mapping.assign(variable, value.T, name, source_shape=value.shape)
            else:
                mapping.assign(variable, value, name)
    mapping.assign(pretrainer.lm_bias, mapping.take("lm_loss.bias"), "lm_loss.bias")
    mapping.take_tied_copy("lm_loss.weight", embedding, "the word embedding",
                           "the LM head of XLNetPretrainer is tied to the embedding")


def _stack(mapping, names, variable, layer_shape):
    """Takes per-layer arrays and stacks them into [num_layers, ...]; None if one is missing or mis-shaped."""
    arrays = [mapping.take(name) for name in names]
    ok = all(a is not None for a in arrays)
    for name, array in zip(names, arrays):
        if array is not None and tuple(array.shape) != tuple(layer_shape):
            mapping.errors.append(
                f"shape mismatch: source {name!r} has shape {tuple(array.shape)}, each layer's slice of "
                f"model weight {variable.path!r} {tuple(variable.shape)} has shape {tuple(layer_shape)}")
            ok = False
    return np.stack(arrays) if ok else None
