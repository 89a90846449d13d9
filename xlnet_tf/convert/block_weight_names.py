"""`block_weight_names`: where each weight of an `XLNetBlock` is stored in a source checkpoint."""

import operator

CHECKPOINT_FORMATS = ("tf1", "transformers")

# Both checkpoints name a layer's weights by one regular scheme, spelled here once
# for the two converters, so a weight added to the block cannot be missed by one of them.
# TF1 (scope `.../layer_<i>/`): `rel_attn/q/kernel`, `rel_attn/LayerNorm/gamma`, `ff/layer_1/kernel`.
# Hugging Face (scope `...layer.<i>.`): `rel_attn.q`, `rel_attn.layer_norm.weight`, `ff.layer_1.weight`.
_ATTENTION_KERNELS = (("query", "q"), ("key", "k"), ("value", "v"), ("position", "r"), ("output", "o"))
_FEEDFORWARD_LAYERS = (("feedforward_intermediate", "layer_1"), ("feedforward_output", "layer_2"))
# Layer norm: Keras gamma / beta are TF1 gamma / beta and Hugging Face weight / bias.
_ATTENTION_LAYER_NORM = ("attention.layer_norm", "rel_attn/LayerNorm", "rel_attn.layer_norm")
_FEEDFORWARD_LAYER_NORM = ("feedforward_layer_norm", "ff/LayerNorm", "ff.layer_norm")


def _layer_norm(attribute, tf1_scope, transformers_scope):
    return [(f"{attribute}.gamma", f"{tf1_scope}/gamma", f"{transformers_scope}.weight"),
            (f"{attribute}.beta", f"{tf1_scope}/beta", f"{transformers_scope}.bias")]


def _weight_table():
    """`(attribute path in XLNetBlock, TF1 name, Hugging Face name)` rows, in the TF1 converter's order."""
    rows = [(f"attention.{role}_kernel", f"rel_attn/{letter}/kernel", f"rel_attn.{letter}")
            for role, letter in _ATTENTION_KERNELS]
    rows += _layer_norm(*_ATTENTION_LAYER_NORM)
    for attribute, layer in _FEEDFORWARD_LAYERS:
        rows += [(f"{attribute}.kernel", f"ff/{layer}/kernel", f"ff.{layer}.weight"),
                 (f"{attribute}.bias", f"ff/{layer}/bias", f"ff.{layer}.bias")]
    return rows + _layer_norm(*_FEEDFORWARD_LAYER_NORM)


def block_weight_names(block, checkpoint_format):
    """Every weight of `block` with the name it has in one layer's scope of a checkpoint.

    Args:
        block: a built `xlnet_tf.layers.xlnet_block.XLNetBlock`.
        checkpoint_format: `"tf1"` (original zihangdai/xlnet names) or
            `"transformers"` (Hugging Face names; the two feed-forward `weight`s
            are torch `Linear` weights, `[out, in]`, the transpose of the kernels).

    Returns:
        A list of 13 `(variable, name)`: the attention's five kernels and layer
        norm, then the feed-forward kernels, biases and layer norm. Prefix each
        name with the layer's scope.

    Example:
    >>> from xlnet_tf.convert.block_weight_names import block_weight_names
    >>> from xlnet_tf.layers.xlnet_block import XLNetBlock
    >>> block = XLNetBlock(hidden_dim=8, num_heads=2, head_dim=4, intermediate_dim=16)
    >>> block.build((None, None, 8))
    >>> [name for _, name in block_weight_names(block, "tf1")][:2]
    ['rel_attn/q/kernel', 'rel_attn/k/kernel']
    >>> [name for _, name in block_weight_names(block, "transformers")][-4:-2]
    ['ff.layer_2.weight', 'ff.layer_2.bias']
    """
    if checkpoint_format not in CHECKPOINT_FORMATS:
        raise ValueError(f"checkpoint_format must be one of {CHECKPOINT_FORMATS}, got {checkpoint_format!r}.")
    column = 1 + CHECKPOINT_FORMATS.index(checkpoint_format)
    return [(operator.attrgetter(row[0])(block), row[column]) for row in _weight_table()]
