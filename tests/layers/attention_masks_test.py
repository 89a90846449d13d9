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
