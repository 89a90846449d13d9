import numpy as np

from xlnet_tf.layers.rel_shift import rel_shift


def test_rel_shift_golden():
    x = np.arange(10.0).reshape(1, 1, 2, 5)
    assert np.asarray(rel_shift(x, 3))[0, 0].tolist() == [[2.0, 3.0, 4.0], [6.0, 7.0, 8.0]]


def test_rel_shift_matches_definition_for_every_row_and_batch():
    rng = np.random.default_rng(0)
    batch, heads, length, memory = 3, 2, 4, 2
    key_length = memory + length
    x = rng.normal(size=(batch, heads, length, key_length + length)).astype("float32")
    shifted = np.asarray(rel_shift(x, key_length))
    expected = np.empty((batch, heads, length, key_length), "float32")
    for i in range(length):
        for j in range(key_length):
            expected[:, :, i, j] = x[:, :, i, j + length - i]
    np.testing.assert_array_equal(shifted, expected)


def test_rel_shift_does_not_mix_batch_rows():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 2, 3, 6)).astype("float32")
    together = np.asarray(rel_shift(x, 3))
    for b in range(4):
        np.testing.assert_array_equal(together[b], np.asarray(rel_shift(x[b:b + 1], 3))[0])


def test_gather_rel_shift_matches_rel_shift_rows():
    from xlnet_tf.layers.rel_shift import gather_rel_shift

    rng = np.random.default_rng(2)
    batch, heads, length, memory = 2, 3, 5, 2
    key_length = memory + length
    for relative_length in (key_length + length, key_length + 1):  # bi, uni
        x = rng.normal(size=(batch, heads, length, relative_length)).astype("float32")
        full = np.asarray(rel_shift(x, key_length))
        positions = np.array([[4, 0, 2], [1, 1, 3]])
        rows = np.stack([x[b][:, positions[b]] for b in range(batch)])  # [B, N, P, R]
        gathered = np.asarray(gather_rel_shift(rows, positions, key_length, length))
        for b in range(batch):
            for p, i in enumerate(positions[b]):
                valid = key_length if relative_length > key_length + 1 else memory + i + 1
                np.testing.assert_array_equal(gathered[b, :, p, :valid], full[b, :, i, :valid])
