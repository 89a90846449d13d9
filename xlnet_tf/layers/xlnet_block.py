"""One XLNet layer: two-stream relative attention followed by a feed-forward network."""

import keras
from keras import ops

from xlnet_tf.layers.relative_attention import RelativeAttention, sequence_length, split_streams
from xlnet_tf.layers.seeded_dropout import apply_stacked_dropout

# Dropout sites under one `dropout_seed`, after RelativeAttention's 0-3: per stream,
# (after the activation, after the output projection).
FEEDFORWARD_SITES = {"content": (4, 5), "query": (6, 7)}


def _gelu_approximate(x):
    # The tanh form of the original TF1 XLNet; Keras' approximate gelu is the same formula.
    return keras.activations.gelu(x, approximate=True)


def _in_float32(activation, x):
    """`activation(x)` computed in float32 and returned in x's dtype.

    CPU kernels have no vectorized bfloat16 erfc/tanh: the exact GELU of a
    bfloat16 `[B, L, I]` tensor took several times longer than casting it to
    float32 and back, a sizeable share of a bfloat16 forward pass. XLA fuses the casts away on
    TPUs and GPUs, and the activation is more accurate in float32.
    """
    if keras.backend.standardize_dtype(x.dtype) in ("bfloat16", "float16"):
        return ops.cast(activation(ops.cast(x, "float32")), x.dtype)
    return activation(x)


_ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": _gelu_approximate,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "swish": keras.activations.silu,
}


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetBlock(keras.layers.Layer):
    """Post-LN XLNet block shared by the content and query streams.

    Attention (see `RelativeAttention`), then for each stream
    `LayerNorm(x + dropout(W2 · dropout(act(W1 · x + b1)) + b2))`. The query
    stream reuses every weight of the content stream.

    Args:
        hidden_dim: H, the model width.
        num_heads: attention heads.
        head_dim: size of each head.
        intermediate_dim: width of the feed-forward layer.
        activation: "gelu" (exact), "gelu_approximate" (tanh), "relu", "tanh" or "swish".
        dropout: dropout of attention output and feed-forward.
        attention_dropout: dropout of attention probabilities.
        layer_norm_epsilon: epsilon of both layer norms.
        kernel_initializer: initializer of all kernels.

    Call arguments:
        content_stream: `[B, L, H]`.
        query_stream: optional `[B, P, H]`.
        everything else (including `dropout_seed` and `stack_streams`, which
            also applies to the feed-forward, `memory_heads` and
            `output_key_value_heads`): as `RelativeAttention.call`.

    Returns:
        `(content_output [B, L, H] (`[B, Q, H]` with `content_positions`),
        query_output [B, P, H] or None)`, plus the attention's `(keys, values)`
        of `[memory | block]`, each `[B, N, M+L, D]`, with `output_key_value_heads`.

    Example:
    >>> import numpy as np
    >>> block = XLNetBlock(hidden_dim=8, num_heads=2, head_dim=4, intermediate_dim=16)
    >>> h = np.random.rand(1, 3, 8).astype("float32")
    >>> pos = np.random.rand(1, 6, 8).astype("float32")
    >>> no_mask = np.zeros((1, 3, 3), bool)
    >>> bias = np.zeros((2, 4), "float32")
    >>> out, _ = block(h, pos, no_mask, no_mask, bias, bias, bias, np.zeros((2, 2, 4), "float32"))
    >>> tuple(out.shape)
    (1, 3, 8)
    """

    def __init__(self, hidden_dim, num_heads, head_dim, intermediate_dim, activation="gelu", dropout=0.0,
                 attention_dropout=0.0, layer_norm_epsilon=1e-12,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"XLNetBlock: unknown activation {activation!r}; "
                             f"expected one of {sorted(_ACTIVATIONS)}.")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        initializer_config = keras.initializers.serialize(self.kernel_initializer)
        self.attention = RelativeAttention(
            num_heads=num_heads, head_dim=head_dim, dropout=dropout,
            attention_dropout=attention_dropout, layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=initializer_config, dtype=self.dtype_policy, name="attention")
        self.feedforward_intermediate = keras.layers.Dense(
            intermediate_dim, kernel_initializer=keras.initializers.deserialize(initializer_config),
            dtype=self.dtype_policy, name="feedforward_intermediate")
        self.feedforward_output = keras.layers.Dense(
            hidden_dim, kernel_initializer=keras.initializers.deserialize(initializer_config),
            dtype=self.dtype_policy, name="feedforward_output")
        self.feedforward_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.feedforward_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="feedforward_layer_norm")
        self._activation_fn = _ACTIVATIONS[activation]

    def build(self, content_stream_shape, *args, **kwargs):
        self.attention.build(content_stream_shape)
        self.feedforward_intermediate.build(content_stream_shape)
        self.feedforward_output.build(tuple(content_stream_shape[:-1]) + (self.intermediate_dim,))
        self.feedforward_layer_norm.build(content_stream_shape)
        self.built = True

    def _feedforward(self, streams, lengths, stream_names, training, dropout_seed=None):
        """The feed-forward sublayer of one stream, or of both stacked along the rows.

        Stacked, each shared kernel takes one matmul (cast once under mixed precision,
        one gradient instead of two summed); each stream keeps its own dropout sites.
        """
        hidden_sites = [FEEDFORWARD_SITES[name][0] for name in stream_names]
        output_sites = [FEEDFORWARD_SITES[name][1] for name in stream_names]
        hidden = self.feedforward_intermediate(streams)  # [B, L, I]
        hidden = _in_float32(self._activation_fn, hidden)
        hidden = apply_stacked_dropout(self.feedforward_dropout, hidden, lengths, training,
                                       dropout_seed, hidden_sites)
        output = self.feedforward_output(hidden)  # [B, L, H]
        output = apply_stacked_dropout(self.feedforward_dropout, output, lengths, training,
                                       dropout_seed, output_sites)
        return self.feedforward_layer_norm(streams + output)

    def call(self, content_stream, position_encoding, segment_different, content_mask,
             content_bias, positional_bias, segment_bias, segment_encoding,
             memory=None, query_stream=None, query_mask=None, target_mapping=None,
             content_positions=None, position_heads=None, training=None, dropout_seed=None,
             stack_streams=True, memory_heads=None, output_key_value_heads=False):
        content_output, query_output, *key_value_heads = self.attention(
            content_stream, position_encoding, segment_different, content_mask,
            content_bias, positional_bias, segment_bias, segment_encoding,
            memory=memory, query_stream=query_stream, query_mask=query_mask,
            target_mapping=target_mapping, content_positions=content_positions,
            position_heads=position_heads, training=training, dropout_seed=dropout_seed,
            stack_streams=stack_streams, memory_heads=memory_heads,
            output_key_value_heads=output_key_value_heads)
        content_length = sequence_length(content_output)
        if query_output is None or not stack_streams:
            content_output = self._feedforward(content_output, [content_length], ["content"],
                                               training, dropout_seed)
            if query_output is not None:
                query_output = self._feedforward(query_output, [sequence_length(query_output)],
                                                 ["query"], training, dropout_seed)
            return (content_output, query_output, *key_value_heads)
        lengths = [content_length, sequence_length(query_output)]
        streams = ops.concatenate([content_output, query_output], axis=1)  # [B, L+P, H]
        streams = self._feedforward(streams, lengths, ["content", "query"], training, dropout_seed)
        content_output, query_output = split_streams(streams, lengths)
        return (content_output, query_output, *key_value_heads)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_dim=self.hidden_dim,
            num_heads=self.num_heads,
            head_dim=self.head_dim,
            intermediate_dim=self.intermediate_dim,
            activation=self.activation,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
