"""Attention masks of XLNet, built in one place.

Convention everywhere in this package: a mask value of True (or 1) means the
query position may NOT attend to the key position. Key columns are laid out as
`[memory (M) | current block (L)]`, so masks have shape `[B, L, M + L]`.
"""

import keras
from keras import ops


def causal_block_mask(query_length, memory_length, same_length=False):
    """The causal mask of `attention_type="uni"`, shared by the whole batch.

    Memory columns stay open; inside the current block a query sees itself and
    earlier positions. With `same_length`, query `i` additionally loses the
    keys `j < i`, so every query sees exactly `memory_length + 1` keys (the
    Transformer-XL evaluation trick).

    Args:
        query_length: L, the length of the current block.
        memory_length: M, the number of cached positions before it.
        same_length: whether to limit every query to the same window.

    Returns:
        A bool tensor `[L, M + L]`, True where attention is blocked.

    Example:
    >>> mask = causal_block_mask(3, 1)
    >>> keras.ops.convert_to_numpy(mask).astype(int).tolist()
    [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    """
    query_index = ops.arange(query_length)[:, None]  # [L, 1]
    key_index = ops.arange(memory_length + query_length)[None, :]  # [1, M+L]
    blocked = key_index > query_index + memory_length  # [L, M+L]
    if same_length:
        blocked = ops.logical_or(blocked, key_index < query_index)
    return blocked


def xlnet_attention_masks(padding_mask, perm_mask=None, memory_length=0,
                          attention_type="bi", same_length=False, memory_padding_mask=None):
    """Content-stream and query-stream masks of XLNet.

    The data mask blocks padded keys and whatever `perm_mask` forbids; memory
    columns are open unless `memory_padding_mask` marks them as padding (memory
    cached from the left padding of a long document's earlier segments), for
    both streams. `attention_type="uni"` adds the causal block mask.
    The query stream uses that mask as it is (a target must not see its own
    token); the content stream clears the diagonal of the current block so a
    token always sees itself.

    Args:
        padding_mask: `[B, L]`, 1 or True for real tokens.
        perm_mask: optional `[B, L, L]`, 1 where position i may not attend to j.
        memory_length: M, the number of memory columns in front of the block.
        attention_type: `"bi"` or `"uni"`.
        same_length: see `causal_block_mask`.
        memory_padding_mask: optional `[B, M]`, 1 or True for real memory
            positions; None = every memory position is real.

    Returns:
        `(content_mask, query_mask)`, bool tensors `[B, L, M + L]`, True = blocked.

    Example:
    >>> content, query = xlnet_attention_masks(keras.ops.array([[0, 1, 1]]))
    >>> keras.ops.convert_to_numpy(query)[0].astype(int).tolist()
    [[1, 0, 0], [1, 0, 0], [1, 0, 0]]
    >>> keras.ops.convert_to_numpy(content)[0].astype(int).tolist()
    [[0, 0, 0], [1, 0, 0], [1, 0, 0]]
    >>> content, _ = xlnet_attention_masks(keras.ops.array([[1, 1]]), memory_length=2,
    ...                                    memory_padding_mask=keras.ops.array([[0, 1]]))
    >>> keras.ops.convert_to_numpy(content)[0].astype(int).tolist()
    [[1, 0, 0, 0], [1, 0, 0, 0]]
    """
    padding_mask = ops.cast(padding_mask, "bool")
    batch_size = ops.shape(padding_mask)[0]
    query_length = ops.shape(padding_mask)[1]
    padded_keys = ops.logical_not(padding_mask)[:, None, :]  # [B, 1, L]
    blocked = ops.broadcast_to(padded_keys, (batch_size, query_length, query_length))  # [B, L, L]
    if perm_mask is not None:
        blocked = ops.logical_or(blocked, ops.cast(perm_mask, "bool"))
    if memory_length:
        if memory_padding_mask is None:
            memory_blocked = ops.zeros((batch_size, query_length, memory_length), dtype="bool")
        else:
            padded_memory = ops.logical_not(ops.cast(memory_padding_mask, "bool"))[:, None, :]  # [B, 1, M]
            memory_blocked = ops.broadcast_to(
                padded_memory, (batch_size, query_length, memory_length))  # [B, L, M]
        blocked = ops.concatenate([memory_blocked, blocked], axis=-1)  # [B, L, M+L]
    if attention_type == "uni":
        causal = causal_block_mask(query_length, memory_length, same_length)
        blocked = ops.logical_or(blocked, causal[None])
    query_mask = blocked
    query_index = ops.arange(query_length)[:, None]
    key_index = ops.arange(memory_length + query_length)[None, :]
    diagonal = ops.equal(key_index, query_index + memory_length)[None]  # [1, L, M+L]
    content_mask = ops.logical_and(query_mask, ops.logical_not(diagonal))
    return content_mask, query_mask


def mask_value(dtype):
    """A large negative logit for `dtype` that survives softmax without overflow."""
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "float16":
        return -6.0e4
    if dtype == "bfloat16":
        return -1.0e9
    return -1.0e30
