"""Transformer-XL relative multi-head attention with XLNet's two streams."""

import keras
from keras import ops

from xlnet_tf.layers.attention_masks import mask_value
from xlnet_tf.layers.dropped_attention import dropped_attention
from xlnet_tf.layers.rel_shift import gather_rel_shift, rel_shift
from xlnet_tf.layers.seeded_dropout import (apply_keep_mask, apply_stacked_dropout,
                                            apply_unscaled_dropout, dropout_keep_mask)

# Dropout sites under one `dropout_seed` (XLNetBlock uses 4-7 for its feed-forward).
CONTENT_PROBABILITIES, CONTENT_OUTPUT, QUERY_PROBABILITIES, QUERY_OUTPUT = 0, 1, 2, 3


def sequence_length(tensor):
    """Size of axis 1: the static one where known (the slices and masks keep static shapes)."""
    return tensor.shape[1] if tensor.shape[1] is not None else ops.shape(tensor)[1]


def split_streams(tensor, lengths, axis=1):
    """The streams stacked along `axis`, apart again.

    On TensorFlow `tf.split`, not two slices: its gradient is one
    concatenation, where each slice's gradient would be a zero-filled tensor of
    the full stacked size. `tf.split` also takes lengths known only as tensors.

    Args:
        tensor: the stacked streams.
        lengths: each stream's length along `axis` (ints; on TensorFlow also
            scalar tensors).
        axis: the stacking axis.

    Returns:
        A list of tensors, one per length.

    Example:
    >>> import numpy as np
    >>> parts = split_streams(np.zeros((2, 5, 3), "float32"), [3, 2])
    >>> [tuple(part.shape) for part in parts]
    [(2, 3, 3), (2, 2, 3)]
    """
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        return tf.split(tensor, lengths, axis=axis)
    # JAX's and PyTorch's slice gradients are cheap pads/scatters; shapes are static ints here.
    boundaries, start = [], 0
    for length in lengths[:-1]:
        start += int(length)
        boundaries.append(start)
    return ops.split(tensor, boundaries, axis=axis)


def _rows_at(positions, *tensors):
    """Rows `positions [B, Q]` of each `[B, L, K]` tensor (masks, segment comparisons): `[B, Q, K]` each."""
    positions = ops.cast(positions, "int32")
    shape = ops.shape(tensors[0])
    row_index = ops.broadcast_to(
        positions[:, :, None], (shape[0], ops.shape(positions)[1], shape[2]))  # [B, Q, K]
    return tuple(ops.take_along_axis(tensor, row_index, axis=1) for tensor in tensors)  # [B, Q, K] each


@keras.saving.register_keras_serializable(package="xlnet_tf")
class RelativeAttention(keras.layers.Layer):
    """Relative multi-head attention over `[memory | current block]`, one or two streams.

    The score of query i and key j is
    `((q_i + r_w)·k_j + rel_shift((q_i + r_r)·r)_ij + (q_i + r_s)·s_ij) / sqrt(head_dim)`
    where `r` are the projected relative position encodings and `s_ij` is the
    segment encoding of "same segment" or "different segment" (memory columns
    count as segment 0). The biases `r_w, r_r, r_s` and the segment encodings
    are passed in by the caller because XLNet may tie them across layers.

    The content stream `h` attends to `[memory | h]`. The optional query stream
    `g` (XLNet's two-stream attention) uses the same projections: its queries
    come from `g`, its keys and values from the content stream, and its mask
    hides each target's own token. With `target_mapping`, `g` holds one row per
    prediction and is scattered to / gathered from sequence positions.

    Post-LN: each stream's output is `LayerNorm(stream + dropout(attention))`.
    With two streams, the query projection and this output sublayer run on both
    stacked along the rows: one matmul per shared kernel, each stream's own dropout
    (`stack_streams=False` runs them per stream).

    Args:
        num_heads: N.
        head_dim: D.
        dropout: dropout on the attention output.
        attention_dropout: dropout on the attention probabilities.
        layer_norm_epsilon: epsilon of the layer norm.
        kernel_initializer: initializer of the projections.

    Call arguments:
        content_stream: `[B, L, H]`, the content stream h.
        position_encoding: `[B or 1, R, H]` from `RelativePositionEncoding`.
        segment_different: bool `[B, L, M+L]`, True where query and key segments differ.
        content_mask: bool `[B, L, M+L]`, True = blocked.
        content_bias, positional_bias, segment_bias: `[N, D]` (r_w, r_r, r_s).
        segment_encoding: `[2, N, D]`, row 0 "same", row 1 "different".
        memory: optional `[B, M, H]`, this layer's cached inputs.
        query_stream: optional `[B, P, H]` (with target_mapping) or `[B, L, H]`.
        query_mask: bool `[B, L, M+L]`, required with `query_stream`.
        target_mapping: optional `[B, P, L]` one-hot rows.
        content_positions: optional int `[B, Q]`: compute the content stream only
            at these positions of the block (its keys and values still come from
            every position); `content_output` is then `[B, Q, H]`. A classifier
            that reads `<cls>` only needs its last layer at one position.
        position_heads: optional `[B|1, N, R, D]`, `position_encoding` already
            projected (`project_positions`); the projection is then skipped.
        training: Python bool.
        dropout_seed: optional int `[2]`: draw every dropout mask statelessly from it
            (used by rematerialization, which runs the layer twice).
        stack_streams: with `query_stream`, run the query projection and the
            output sublayer on both streams stacked along the rows (the default).
            False runs them per stream, so a graph that reads only one stream's
            output can prune the other's work (the backbone's last layer under
            the pretraining loss, which reads the query stream only). The
            outputs are the same either way, dropout masks included.
        memory_heads: optional `(keys, values)`, each `[B, N, M, D]`: the
            memory already through the key and value projections
            (`project_keys_values` of this layer's cached inputs), instead of
            `memory`. Memory that does not change between calls (generation's
            `cached` mode) is then projected once, not once per call.
        output_key_value_heads: also return the `(keys, values)` the attention
            read, each `[B, N, M+L, D]`: the memory's, then the block's as
            projected here.

    Returns:
        `(content_output [B, L, H] (or [B, Q, H]), query_output [B, P, H] or None)`,
        plus the `(keys, values)` of `[memory | block]` with `output_key_value_heads`.

    Example:
    >>> import numpy as np
    >>> layer = RelativeAttention(num_heads=2, head_dim=4)
    >>> h = np.random.rand(1, 3, 8).astype("float32")
    >>> pos = np.random.rand(1, 6, 8).astype("float32")
    >>> no_mask = np.zeros((1, 3, 3), bool)
    >>> bias = np.zeros((2, 4), "float32")
    >>> out, _ = layer(h, pos, no_mask, no_mask, bias, bias, bias, np.zeros((2, 2, 4), "float32"))
    >>> tuple(out.shape)
    (1, 3, 8)
    """

    def __init__(self, num_heads, head_dim, dropout=0.0, attention_dropout=0.0,
                 layer_norm_epsilon=1e-12, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.probability_dropout = keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")

    def build(self, content_stream_shape, *args, **kwargs):
        hidden_dim = content_stream_shape[-1]
        shape = (hidden_dim, self.num_heads, self.head_dim)

        def kernel(name):
            # A fresh initializer object per kernel so seeded initializers don't repeat.
            initializer = keras.initializers.get(
                {"class_name": self.kernel_initializer.__class__.__name__,
                 "config": self.kernel_initializer.get_config()})
            return self.add_weight(name=name, shape=shape, initializer=initializer)

        self.query_kernel = kernel("query_kernel")
        self.key_kernel = kernel("key_kernel")
        self.value_kernel = kernel("value_kernel")
        self.position_kernel = kernel("position_kernel")
        self.output_kernel = kernel("output_kernel")
        self.layer_norm.build(content_stream_shape)
        self.built = True

    def _attend(self, query_heads, key_heads, value_heads, position_heads, segment_different,
                mask, content_bias, positional_bias, segment_bias, segment_encoding, training,
                query_positions=None, block_length=None, dropout_seed=None,
                dropout_site=CONTENT_PROBABILITIES):
        """Attention of `query_heads [B, N, Q, D]` over the keys; returns `[B, N, Q, D]`.

        Q is the block length L (row i is position i), or P predictions at
        `query_positions [B, P]` (then `segment_different` and `mask` are `[B, P, K]`).
        """
        key_length = ops.shape(key_heads)[2]
        # 1 / sqrt(D) on the [B, N, Q, D] queries, not on the [B, N, Q, K] scores: one
        # full pass less over the scores, forward and backward.
        scale = 1.0 / self.head_dim ** 0.5
        query_heads = query_heads * ops.cast(scale, query_heads.dtype)
        content_scores = ops.einsum(
            "bnid,bnjd->bnij", query_heads + content_bias[:, None, :] * scale, key_heads)  # [B, N, Q, K]
        # A matmul against the transposed position heads, broadcast over the batch when
        # there is one position sequence, avoids transposing [B, N, Q, R] tensors.
        position_scores = ops.matmul(
            query_heads + positional_bias[:, None, :] * scale,
            ops.swapaxes(position_heads, -1, -2))  # [B, N, Q, R]
        if query_positions is None:
            position_scores = rel_shift(position_scores, key_length)  # [B, N, L, K]
        else:
            position_scores = gather_rel_shift(
                position_scores, query_positions, key_length, block_length)  # [B, N, P, K]
        segment_scores = ops.einsum(
            "bnid,snd->bnis", query_heads + segment_bias[:, None, :] * scale, segment_encoding)  # [B, N, Q, 2]
        # A key scores s_same or s_different. s_same is the same for every key of a query row, and a
        # softmax ignores a constant per row, so only `different * (s_different - s_same)` is added:
        # one pass over [B, N, Q, K] less, forward and backward.
        different = ops.cast(segment_different, segment_scores.dtype)[:, None, :, :]  # [B, 1, Q, K]
        segment_scores = different * (segment_scores[..., 1:2] - segment_scores[..., 0:1])  # [B, N, Q, K]
        scores = content_scores + position_scores + segment_scores
        # Softmax in float32 with a float32 mask constant: nothing overflows in bf16/fp16.
        scores = ops.cast(scores, "float32")
        scores = scores + ops.cast(mask, "float32")[:, None, :, :] * mask_value("float32")
        # Dropout's 1 / (1 - rate) goes on the [B, N, Q, D] result, not the [B, N, Q, K] probabilities.
        keep = keep_scale = None
        if dropout_seed is not None:
            keep, keep_scale = dropout_keep_mask(
                self.probability_dropout, scores, training, dropout_seed, dropout_site)
        if keep is not None and self.compute_dtype == "float32":
            # Holds the probabilities only, not also the dropped ones, for the backward step.
            heads = dropped_attention(scores, keep, value_heads)  # [B, N, Q, D]
        else:
            probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
            if keep is None:
                probabilities, keep_scale = apply_unscaled_dropout(
                    self.probability_dropout, probabilities, training, dropout_seed, dropout_site)
            else:
                probabilities = apply_keep_mask(keep, probabilities)
            heads = ops.einsum("bnij,bnjd->bnid", probabilities, value_heads)  # [B, N, Q, D]
        if keep_scale != 1.0:
            heads = heads * ops.cast(keep_scale, heads.dtype)
        return heads

    def project_keys_values(self, stream):
        """`[B, L, H]` layer inputs -> `(keys, values)`, each `[B, N, L, D]`: what the attention reads of a column."""
        keys = ops.einsum("bjh,hnd->bnjd", stream, self.key_kernel)  # [B, N, L, D]
        values = ops.einsum("bjh,hnd->bnjd", stream, self.value_kernel)  # [B, N, L, D]
        return keys, values

    def project_positions(self, position_encoding):
        """`[B|1, R, H]` relative position encodings -> `[B|1, N, R, D]` position heads."""
        return ops.einsum("brh,hnd->bnrd", position_encoding, self.position_kernel)  # [B|1, N, R, D]

    def _post_attention(self, stream, attention_heads, training, dropout_seed, lengths, sites):
        """`LayerNorm(stream + dropout(heads · W_o))` of one stream, or of both stacked along the rows."""
        output = ops.einsum("bnid,hnd->bih", attention_heads, self.output_kernel)  # [B, L, H]
        output = apply_stacked_dropout(self.output_dropout, output, lengths, training, dropout_seed,
                                       sites)
        return self.layer_norm(stream + output)

    def call(self, content_stream, position_encoding, segment_different, content_mask,
             content_bias, positional_bias, segment_bias, segment_encoding,
             memory=None, query_stream=None, query_mask=None, target_mapping=None,
             content_positions=None, position_heads=None, training=None, dropout_seed=None,
             stack_streams=True, memory_heads=None, output_key_value_heads=False):
        if memory is not None and memory_heads is not None:
            raise ValueError("RelativeAttention: pass the memory as layer inputs (memory) or projected "
                             "(memory_heads), not both.")
        if memory_heads is not None:
            key_heads, value_heads = (
                ops.concatenate([ops.cast(memory_part, block_part.dtype), block_part], axis=2)
                for memory_part, block_part in zip(memory_heads, self.project_keys_values(content_stream))
            )  # [B, N, M+L, D] each
        else:
            keys_input = content_stream
            if memory is not None:
                keys_input = ops.concatenate([ops.cast(memory, content_stream.dtype), content_stream],
                                             axis=1)  # [B, M+L, H]
            key_heads, value_heads = self.project_keys_values(keys_input)  # [B, N, M+L, D] each
        if position_heads is None:
            position_heads = self.project_positions(position_encoding)  # [B|1, N, R, D]
        biases = dict(content_bias=content_bias, positional_bias=positional_bias,
                      segment_bias=segment_bias, segment_encoding=segment_encoding)

        if query_stream is not None and query_mask is None:
            raise ValueError("RelativeAttention: query_stream needs query_mask.")
        if content_positions is None:
            rows, rows_segment, rows_mask = content_stream, segment_different, content_mask
        else:
            content_positions = ops.cast(content_positions, "int32")
            rows = ops.take_along_axis(content_stream, content_positions[:, :, None], axis=1)  # [B, Q, H]
            rows_segment, rows_mask = _rows_at(content_positions, segment_different, content_mask)
        row_count = sequence_length(rows)
        stacked = query_stream is not None and stack_streams
        if stacked:
            # Both streams' rows in one tensor: each shared kernel (query, output) takes one
            # matmul, is cast once under mixed precision, and gets one gradient instead of two summed.
            query_length = sequence_length(query_stream)
            streams = ops.concatenate([rows, ops.cast(query_stream, rows.dtype)], axis=1)  # [B, Q+P, H]
            all_queries = ops.einsum("bih,hnd->bnid", streams, self.query_kernel)  # [B, N, Q+P, D]
            content_query, query_heads = split_streams(all_queries, [row_count, query_length],
                                                       axis=2)  # [B, N, Q, D], [B, N, P, D]
        else:
            content_query = ops.einsum("bih,hnd->bnid", rows, self.query_kernel)  # [B, N, Q, D]
        content_heads = self._attend(
            content_query, key_heads, value_heads, position_heads, rows_segment, rows_mask,
            training=training, query_positions=content_positions,
            block_length=ops.shape(content_stream)[1], dropout_seed=dropout_seed,
            **biases)  # [B, N, Q, D]
        if not stacked:
            content_output = self._post_attention(rows, content_heads, training, dropout_seed,
                                                  [row_count], [CONTENT_OUTPUT])
            if query_stream is None:
                return self._with_heads((content_output, None), output_key_value_heads, key_heads, value_heads)
            query_stream = ops.cast(query_stream, rows.dtype)
            query_length = sequence_length(query_stream)
            query_heads = ops.einsum("bph,hnd->bnpd", query_stream, self.query_kernel)  # [B, N, P, D]

        if target_mapping is None:
            query_heads = self._attend(query_heads, key_heads, value_heads, position_heads,
                                       segment_different, query_mask, training=training,
                                       dropout_seed=dropout_seed, dropout_site=QUERY_PROBABILITIES,
                                       **biases)
        else:
            # Attend from the P predictions only, each at the position its one-hot row picks;
            # rows that pick nothing (padding up to num_predict) get no attention output.
            target_mapping = ops.cast(target_mapping, "float32")
            query_positions = ops.argmax(target_mapping, axis=-1)  # [B, P]
            query_rows_segment, query_rows_mask = _rows_at(query_positions, segment_different, query_mask)
            query_heads = self._attend(
                query_heads, key_heads, value_heads, position_heads, query_rows_segment,
                query_rows_mask, training=training, query_positions=query_positions,
                block_length=ops.shape(content_stream)[1], dropout_seed=dropout_seed,
                dropout_site=QUERY_PROBABILITIES, **biases)
            row_used = ops.cast(ops.sum(target_mapping, axis=-1), query_heads.dtype)  # [B, P]
            query_heads = query_heads * row_used[:, None, :, None]
        if not stacked:
            query_output = self._post_attention(query_stream, query_heads, training, dropout_seed,
                                                [query_length], [QUERY_OUTPUT])
            return self._with_heads((content_output, query_output), output_key_value_heads, key_heads, value_heads)
        heads = ops.concatenate([content_heads, query_heads], axis=2)  # [B, N, Q+P, D]
        outputs = self._post_attention(streams, heads, training, dropout_seed,
                                       [row_count, query_length],
                                       [CONTENT_OUTPUT, QUERY_OUTPUT])  # [B, Q+P, H]
        content_output, query_output = split_streams(outputs, [row_count, query_length])
        return self._with_heads((content_output, query_output), output_key_value_heads, key_heads, value_heads)

    @staticmethod
    def _with_heads(outputs, output_key_value_heads, key_heads, value_heads):
        return outputs + ((key_heads, value_heads),) if output_key_value_heads else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            head_dim=self.head_dim,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
