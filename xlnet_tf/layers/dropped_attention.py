"""Softmax, dropout and the product with the values as one step that keeps one `[B, N, Q, K]` tensor."""

import keras
from keras import ops

from xlnet_tf.layers.seeded_dropout import apply_keep_mask


def dropped_attention(scores, keep, value_heads):
    """`where(keep, softmax(scores), 0) @ value_heads`, holding only the probabilities for the gradient.

    Done op by op, the backward step holds two `[B, N, Q, K]` tensors of each
    attention: the softmax output (for the softmax's gradient) and the dropped
    probabilities (for the values' gradient). The dropped ones are the kept
    ones of the first, so the gradient here recomputes them from the
    probabilities and the boolean `keep` mask: one score-sized tensor less per
    attention and stream until the backward step reaches it (about 22 MB per
    layer for XLNet-Base at seq 512, batch 1, in float32), for the same passes
    over the scores:

        P = softmax(S), Pd = where(keep, P, 0), out = Pd V
        dV = Pd^T dout, dPd = dout V^T
        dS = P * (dP - rowsum(P * dP)) with dP = where(keep, dPd, 0)
           = u - P * rowsum(u) with u = Pd * dPd.

    Dropout's `1 / (1 - rate)` is left to the caller (it goes on the smaller
    result), as with `apply_unscaled_dropout`. The lighter gradient is
    TensorFlow's (`tf.custom_gradient`); JAX and PyTorch run the same forward
    ops under their own autodiff (same outputs and gradients, the op-by-op
    memory).

    Args:
        scores: `[B, N, Q, K]` attention scores, masked keys already at a large
            negative value; the softmax runs in its dtype.
        keep: bool `[B, N, Q, K]`, True where a probability is kept.
        value_heads: `[B, N, K, D]`, in `scores`' dtype.

    Returns:
        `[B, N, Q, D]`.

    Example:
    >>> import numpy as np
    >>> scores = np.random.rand(1, 2, 3, 4).astype("float32")
    >>> keep = np.random.rand(1, 2, 3, 4) > 0.2
    >>> values = np.random.rand(1, 2, 4, 5).astype("float32")
    >>> heads = ops.convert_to_numpy(dropped_attention(scores, keep, values))
    >>> expected = np.where(keep, ops.convert_to_numpy(ops.softmax(scores)), 0.0) @ values
    >>> heads.shape, bool(np.allclose(heads, expected, atol=1e-6))
    ((1, 2, 3, 5), True)
    """
    if keras.config.backend() != "tensorflow":
        probabilities = ops.softmax(scores, axis=-1)  # [B, N, Q, K]
        return ops.matmul(apply_keep_mask(keep, probabilities), value_heads)  # [B, N, Q, D]
    # tf.custom_gradient: the backward step holds the probabilities and the mask only.
    import tensorflow as tf

    @tf.custom_gradient
    def forward(scores, value_heads):
        probabilities = tf.nn.softmax(scores, axis=-1)  # [B, N, Q, K]
        dropped = apply_keep_mask(keep, probabilities)
        heads = tf.matmul(dropped, value_heads)  # [B, N, Q, D]

        def gradient(heads_gradient):
            # Only `probabilities` and `keep` are held from the forward step.
            dropped = apply_keep_mask(keep, probabilities)
            value_gradient = tf.matmul(dropped, heads_gradient, transpose_a=True)  # [B, N, K, D]
            dropped_gradient = tf.matmul(heads_gradient, value_heads, transpose_b=True)  # [B, N, Q, K]
            weighted = dropped * dropped_gradient
            row_sums = tf.reduce_sum(weighted, axis=-1, keepdims=True)  # [B, N, Q, 1]
            return weighted - probabilities * row_sums, value_gradient

        return heads, gradient

    return forward(scores, value_heads)
