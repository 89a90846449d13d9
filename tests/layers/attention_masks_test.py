import numpy as np
import pytest

from xlnet_tf.layers.attention_masks import causal_block_mask, mask_value, xlnet_attention_masks


def as_int(x):
    return np.asarray(x).astype(int).tolist()


def test_causal_block_mask_golden():
    # Memory columns open; a query sees itself and what precedes it.
    assert as_int(causal_block_mask(3, 2)) == [
        [0, 0, 0, 1, 1],
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
    ]


def test_causal_block_mask_same_length_golden():
    # Hand-worked from the original `_create_mask`: strict lower triangle added to the first L columns.
    assert as_int(causal_block_mask(3, 2, same_length=True)) == [
        [0, 0, 0, 1, 1],
        [1, 0, 0, 0, 1],
        [1, 1, 0, 0, 0],
    ]
    # Every query sees the same number of keys: memory_length + 1.
    assert (1 - np.asarray(causal_block_mask(4, 3, same_length=True)).astype(int)).sum(1).tolist() == [4] * 4


def test_padding_and_perm_mask_golden():
    padding = np.array([[0, 1, 1]])
    perm = np.array([[[0, 1, 0], [0, 0, 1], [0, 0, 0]]], "float32")
    content, query = xlnet_attention_masks(padding, perm, memory_length=1)
    # Column 0 is memory (always open); column 1 is the padded key.
    assert as_int(query[0]) == [[0, 1, 1, 0], [0, 1, 0, 1], [0, 1, 0, 0]]
    # The content stream sees its own position even when perm_mask or padding hide it.
    assert as_int(content[0]) == [[0, 0, 1, 0], [0, 1, 0, 1], [0, 1, 0, 0]]


def test_uni_with_data_mask_combines_both():
    content, query = xlnet_attention_masks(np.array([[1, 1, 0]]), attention_type="uni")
    # The causal mask leaves the diagonal open; only the padded key 2 adds to it.
    assert as_int(query[0]) == [[0, 1, 1], [0, 0, 1], [0, 0, 1]]
    assert as_int(content[0]) == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_mask_value_is_finite_in_dtype(dtype):
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)

    np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    value = np.asarray(mask_value(dtype), dtype=np_dtype)
    assert np.isfinite(value.astype(np.float32))
    assert value.astype(np.float32) < -1e4


def test_memory_padding_mask_closes_memory_columns_golden():
    # Row 0: memory column 0 came from padding; row 1: both memory columns are real.
    padding = np.array([[0, 1, 1], [1, 1, 1]])
    memory_padding = np.array([[0, 1], [1, 1]])
    perm = np.zeros((2, 3, 3), "float32")
    perm[:, 2, 1] = 1
    content, query = xlnet_attention_masks(padding, perm, memory_length=2,
                                           memory_padding_mask=memory_padding)
    # Columns: 2 memory, then the block; padded key 2 (block column 0) and perm 2 -> 1 also closed.
    assert as_int(query[0]) == [[1, 0, 1, 0, 0], [1, 0, 1, 0, 0], [1, 0, 1, 1, 0]]
    assert as_int(content[0]) == [[1, 0, 0, 0, 0], [1, 0, 1, 0, 0], [1, 0, 1, 1, 0]]
    assert as_int(query[1]) == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 1, 0]]
    # All-real memory is the same as no memory_padding_mask; uni keeps its causal block.
    for attention_type in ("bi", "uni"):
        with_mask = xlnet_attention_masks(padding, perm, 2, attention_type,
                                          memory_padding_mask=np.ones((2, 2), "int32"))
        without = xlnet_attention_masks(padding, perm, 2, attention_type)
        assert as_int(with_mask) == as_int(without)
    _, uni_query = xlnet_attention_masks(padding, memory_length=2, attention_type="uni",
                                         memory_padding_mask=np.array([[0, 1], [1, 0]], bool))
    # Memory column 1 closed in row 1; the causal mask keeps each query's own key open.
    assert as_int(uni_query[1]) == [[0, 1, 0, 1, 1], [0, 1, 0, 0, 1], [0, 1, 0, 0, 0]]
