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
    # ops.slice rather than `x[...]`: its gradient is a cheap pad, not StridedSliceGrad.
    shifted = ops.slice(shifted, (0, 0, 1, 0),
                        (batch_size, num_heads, relative_length - 1, query_length))  # [B, N, R-1, L]
    shifted = ops.reshape(
        shifted, (batch_size, num_heads, query_length, relative_length - 1))  # [B, N, L, R-1]
    return ops.slice(shifted, (0, 0, 0, 0),
                     (batch_size, num_heads, query_length, key_length))  # [B, N, L, K]


def gather_rel_shift(position_scores, query_positions, key_length, block_length):
    """`rel_shift` for queries at arbitrary positions (XLNet's query stream on P predictions).

    Row p of `position_scores` belongs to the query at sequence position
    `query_positions[b, p]` (i); the output is
    `output[..., p, j] = position_scores[..., p, j + L - i]`, L the block
    length: the same alignment as `rel_shift`, row by row. Indices past the end
    (keys after i under uni attention, always masked) are clipped.

    Args:
        position_scores: `[B, N, P, R]`.
        query_positions: int `[B, P]`, each prediction's position in the block.
        key_length: K = M + L.
        block_length: L.

    Returns:
        `[B, N, P, K]`.
    """
    relative_length = ops.shape(position_scores)[-1]
    key_index = ops.arange(key_length, dtype="int32")[None, None, :]  # [1, 1, K]
    index = key_index + block_length - ops.cast(query_positions, "int32")[:, :, None]
    index = ops.clip(index, 0, relative_length - 1)  # [B, P, K]
    return ops.take_along_axis(position_scores, index[:, None, :, :], axis=-1)  # [B, N, P, K]
