"""The relative shift of Transformer-XL in batch-major layout."""

from keras import ops


def rel_shift(position_scores, key_length):
    """Aligns position scores so that column j holds the score of key j.

    `position_scores[..., i, r]` scores query i against relative distance
    number r of the `RelativePositionEncoding` sequence. After the shift,
    `output[..., i, j] = position_scores[..., i, j + L - i]`: the distance
    between query i (absolute position M + i) and key j. The trick works on the
    last two axes only; a reshape over the batch axis instead would mix rows of
    different examples.

    Args:
        position_scores: `[B, N, L, R]`.
        key_length: K = M + L, the number of keys to keep.

    Returns:
        `[B, N, L, K]`.

    Example:
    >>> import numpy as np
    >>> x = np.arange(10.0).reshape(1, 1, 2, 5)  # L=2, R=K+L=5 with K=3
    >>> ops.convert_to_numpy(rel_shift(x, 3))[0, 0].tolist()
    [[2.0, 3.0, 4.0], [6.0, 7.0, 8.0]]
    """
    shape = ops.shape(position_scores)
    batch_size, num_heads, query_length, relative_length = shape[0], shape[1], shape[2], shape[3]
    shifted = ops.reshape(
        position_scores, (batch_size, num_heads, relative_length, query_length))  # [B, N, R, L]
    shifted = shifted[:, :, 1:, :]  # [B, N, R-1, L]
    shifted = ops.reshape(
        shifted, (batch_size, num_heads, query_length, relative_length - 1))  # [B, N, L, R-1]
    return shifted[:, :, :, :key_length]  # [B, N, L, K]
