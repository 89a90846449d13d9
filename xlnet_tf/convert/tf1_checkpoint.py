"""Original zihangdai/xlnet TF1 checkpoints -> `XLNetPretrainer`."""

import glob
import os

import numpy as np
import tensorflow as tf

from xlnet_tf.formats.preset_files import TF1_CONFIG_FILE
from xlnet_tf.formats.preset_files import VOCABULARY_FILE
from xlnet_tf.convert.checkpoint_config import read_checkpoint_config
from xlnet_tf.convert.block_weight_names import block_weight_names
from xlnet_tf.convert.checkpoint_mapping import CheckpointMapping
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

CONFIG_NAME = TF1_CONFIG_FILE
# Variables that training leaves in a checkpoint and that are not model weights.
IGNORED_PATTERNS = (
    ("*/adam_m", "optimizer slot"), ("*/adam_v", "optimizer slot"),
    ("*/Adam", "optimizer slot"), ("*/Adam_1", "optimizer slot"),
    ("beta1_power", "optimizer state"), ("beta2_power", "optimizer state"),
    ("global_step", "step counter"),
)
_EMBEDDING_SUFFIX = "transformer/word_embedding/lookup_table"


def locate_tf1_checkpoint(input_path, config_path=None):
    """Finds the checkpoint prefix, the config file and the vocabulary of a release.

    Args:
        input_path: a release directory (`xlnet_config.json`, `xlnet_model.ckpt.*`,
            `spiece.model`) or a checkpoint prefix such as `dir/xlnet_model.ckpt`.
        config_path: the original `xlnet_config.json`; by default next to the checkpoint.

    Returns:
        `(checkpoint_prefix, config_path, vocabulary_path_or_None)`.
    """
    if os.path.isdir(input_path):
        directory = input_path
        indexes = sorted(glob.glob(os.path.join(directory, "*.index")))
        if len(indexes) == 1:
            prefix = indexes[0][: -len(".index")]
        else:
            prefix = tf.train.latest_checkpoint(directory)
            if prefix is None:
                found = [os.path.basename(p) for p in indexes]
                raise ConversionError(
                    f"{directory}: expected exactly one TF checkpoint (*.index), found {found or 'none'}; "
                    "pass the checkpoint prefix instead (e.g. DIR/xlnet_model.ckpt).")
    else:
        prefix = input_path
        directory = os.path.dirname(prefix) or "."
        if not os.path.exists(prefix + ".index"):
            raise ConversionError(f"No TF checkpoint at {prefix} ({prefix}.index does not exist).")
    config_path = config_path or os.path.join(directory, CONFIG_NAME)
    if not os.path.exists(config_path):
        raise ConversionError(f"No {CONFIG_NAME} found at {config_path}; pass it with --config.")
    vocabulary = os.path.join(directory, VOCABULARY_FILE)
    return prefix, config_path, vocabulary if os.path.exists(vocabulary) else None


def read_tf1_checkpoint(prefix):
    """All variables of a TF checkpoint as a dict of numpy arrays."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        return {name: np.asarray(reader.get_tensor(name))
                for name in sorted(reader.get_variable_to_shape_map())}
    except (tf.errors.OpError, ValueError, OSError) as e:
        # TensorFlow's message ends in a C++ status trace; its first line says what is wrong.
        first_line = (getattr(e, "message", None) or str(e)).strip().splitlines()[0]
        raise ConversionError(f"{prefix}: not a readable TF checkpoint (truncated or corrupt "
                              f".index/.data files?): {type(e).__name__}: {first_line}") from e


def convert_tf1_checkpoint(input_path, config_path=None, dtype=None):
    """Builds an `XLNetPretrainer` holding the weights of an original TF1 checkpoint.

    Every checkpoint variable must map to a model weight or be an optimizer slot /
    step counter; every model weight must be filled exactly once with the right
    shape. `untie_r` in the config decides whether the relative biases are
    `[num_layers, N, D]` (untied) or `[N, D]` (tied). The original "gelu" is the
    tanh approximation, so the config's activation becomes "gelu_approximate".

    Args:
        input_path: release directory or checkpoint prefix (see `locate_tf1_checkpoint`).
        config_path: optional path of `xlnet_config.json`.
        dtype: dtype policy of the new model.

    Returns:
        `(pretrainer, mapping, vocabulary_path_or_None)`; `mapping` is the
        `CheckpointMapping` with the source arrays and what was ignored.

    Raises:
        ConversionError: naming every missing, unused or mis-shaped variable.

    Example:
    >>> from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint
    >>> pretrainer, _, vocab = convert_tf1_checkpoint("xlnet_cased_L-12_H-768_A-12")  # doctest: +SKIP
    """
    prefix, config_path, vocabulary = locate_tf1_checkpoint(input_path, config_path)
    try:
        config = read_checkpoint_config(config_path)
    except (ValueError, TypeError, KeyError, OSError) as e:
        raise ConversionError(f"{config_path}: not a readable XLNet config: {e}") from e
    arrays = read_tf1_checkpoint(prefix)
    embedding_names = [n for n in arrays if n.endswith(_EMBEDDING_SUFFIX)]
    if len(embedding_names) != 1:
        raise ConversionError(
            f"{prefix}: expected one variable ending in {_EMBEDDING_SUFFIX!r} (the word embedding), "
            f"found {embedding_names}; is this an XLNet checkpoint?")
    scope = embedding_names[0][: -len(_EMBEDDING_SUFFIX)]  # "model/" in the releases.

    pretrainer = XLNetPretrainer(XLNetBackbone(config, dtype=dtype))
    mapping = CheckpointMapping(arrays, source=prefix)
    for pattern, reason in IGNORED_PATTERNS:
        mapping.ignore(pattern, reason)
    _assign(mapping, pretrainer, scope)
    mapping.finish(pretrainer)
    return pretrainer, mapping, vocabulary


def _assign(mapping, pretrainer, scope):
    backbone = pretrainer.backbone
    t = scope + "transformer/"
    embedding = mapping.take(t + "word_embedding/lookup_table")
    mapping.assign(backbone.token_embedding.embeddings, embedding, t + "word_embedding/lookup_table")
    direct = [
        (backbone.mask_embedding, t + "mask_emb/mask_emb"),
        (backbone.content_attention_bias, t + "r_w_bias"),
        (backbone.positional_attention_bias, t + "r_r_bias"),
        (backbone.segment_attention_bias, t + "r_s_bias"),
        (backbone.segment_embedding, t + "seg_embed"),
        (pretrainer.lm_bias, scope + "lm_loss/bias"),
    ]
    for i, block in enumerate(backbone.blocks):
        layer = f"{t}layer_{i}/"
        direct += [(variable, layer + name) for variable, name in block_weight_names(block, "tf1")]
    for variable, name in direct:
        mapping.assign(variable, mapping.take(name), name)
    # Released models tie the softmax weight to the embedding; accept an explicit copy only if equal.
    mapping.take_tied_copy(scope + "lm_loss/weight", embedding, "the word embedding",
                           "the LM head of XLNetPretrainer is tied to the embedding")
