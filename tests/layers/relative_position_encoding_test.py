import keras
import numpy as np
import pytest

from tests.harness import run_layer_test, run_precision_test
from xlnet_tf.layers.relative_position_encoding import RelativePositionEncoding


def distances(**kwargs):
    layer = RelativePositionEncoding(hidden_dim=4, **{k: v for k, v in kwargs.items() if k != "backward"})
    return np.asarray(layer.distances(2, 3, backward=kwargs.get("backward", False))).tolist()


def test_position_sequences_golden():
    # L = 2 queries, K = M + L = 3 keys.
    assert distances() == [3, 2, 1, 0, -1]
    assert distances(attention_type="uni") == [3, 2, 1, 0]
    assert distances(backward=True) == [-3, -2, -1, 0, 1]
    assert distances(clamp_length=2) == [2, 2, 1, 0, -1]
    assert distances(clamp_length=2, backward=True) == [-2, -2, -1, 0, 1]


def test_sinusoid_golden():
    layer = RelativePositionEncoding(hidden_dim=4)
    encoding = np.asarray(layer(query_length=1, key_length=1))[0]  # distances [1, 0]
    inverse_frequency = np.array([1.0, 10000 ** (-2 / 4)])
    for row, p in enumerate([1.0, 0.0]):
        expected = np.concatenate([np.sin(p * inverse_frequency), np.cos(p * inverse_frequency)])
        np.testing.assert_allclose(encoding[row], expected, rtol=1e-6, atol=1e-7)


def test_bi_data_halves():
    layer = RelativePositionEncoding(hidden_dim=4, bi_data=True)
    encoding = np.asarray(layer(query_length=2, key_length=3, batch_size=4))
    forward = np.asarray(RelativePositionEncoding(hidden_dim=4)(query_length=2, key_length=3))[0]
    assert encoding.shape == (4, 5, 4)
    np.testing.assert_allclose(encoding[0], forward)
    np.testing.assert_allclose(encoding[1], forward)
    # The backward stream: sin is odd, cos is even.
    np.testing.assert_allclose(encoding[2][:, :2], -forward[:, :2], atol=1e-7)
    np.testing.assert_allclose(encoding[3][:, 2:], forward[:, 2:], atol=1e-7)


def test_bi_data_rejects_odd_batch():
    with pytest.raises(ValueError, match="even"):
        RelativePositionEncoding(hidden_dim=4, bi_data=True)(query_length=2, key_length=2, batch_size=3)


def test_layer_contract():
    # uni: K + 1 = 4 distances; bi_data: one encoding per row.
    run_layer_test(RelativePositionEncoding, dict(hidden_dim=6, attention_type="uni", bi_data=True, clamp_length=5),
                   dict(query_length=2, key_length=3, batch_size=2), (2, 4, 6))


def test_computes_in_float32_under_bfloat16():
    layer = RelativePositionEncoding(hidden_dim=8, dtype="mixed_bfloat16")
    out = layer(query_length=4, key_length=4)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    run_precision_test(lambda dtype: RelativePositionEncoding(hidden_dim=8, dtype=dtype),
                       dict(query_length=4, key_length=4), tolerance=1e-2)
