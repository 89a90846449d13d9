"""Keras layers of XLNet: relative position encoding, relative (two-stream) attention, the block, masks."""

from xlnet_tf.layers.attention_masks import causal_block_mask, mask_value, xlnet_attention_masks
from xlnet_tf.layers.rel_shift import rel_shift
from xlnet_tf.layers.relative_attention import RelativeAttention
from xlnet_tf.layers.relative_position_encoding import RelativePositionEncoding
from xlnet_tf.layers.xlnet_block import XLNetBlock
