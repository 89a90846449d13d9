import keras
import numpy as np
import tensorflow as tf
from keras import ops

from tests.harness import run_layer_test
from xlnet_tf.layers.embedding import Embedding

V, H = 12, 4
TOKEN_IDS = np.array([[3, 3, 3, 7], [7, 1, 3, 0]], "int32")  # 3 four times, 7 twice, 0 1 once


def _layer(dtype=None):
    keras.utils.set_random_seed(0)
    layer = Embedding(V, H, dtype=dtype)
    layer.build((None, None))
    return layer


def test_the_layer_harness():
    run_layer_test(Embedding, {"input_dim": V, "output_dim": H}, {"inputs": TOKEN_IDS}, (2, 4, H))


def test_lookup_against_numpy():
    layer = _layer()
    np.testing.assert_array_equal(layer(TOKEN_IDS), layer.embeddings.numpy()[TOKEN_IDS])


def test_the_tables_gradient_is_the_dense_sum_of_its_rows():
    layer = _layer()
    upstream = np.random.default_rng(1).normal(size=(2, 4, H)).astype("float32")

    def gradient():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(TOKEN_IDS) * upstream)
        return tape.gradient(loss, layer.embeddings.value)

    dense = gradient()
    expected = np.zeros((V, H), "float32")
    np.add.at(expected, TOKEN_IDS, upstream)
    assert isinstance(dense, tf.Tensor), type(dense)  # not IndexedSlices
    np.testing.assert_allclose(dense, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tf.function(gradient, jit_compile=True)(), expected, rtol=1e-6, atol=1e-6)
    layer.sparse_gradient = True  # TensorFlow's rows, for a caller that sums them itself
    rows = gradient()
    assert isinstance(rows, tf.IndexedSlices) and rows.values.shape[0] == TOKEN_IDS.size
    np.testing.assert_allclose(tf.convert_to_tensor(rows), expected, rtol=1e-6, atol=1e-6)


def test_under_mixed_bfloat16_the_table_is_read_in_float32_even_inside_a_bfloat16_call():
    layer = _layer("mixed_bfloat16")
    vectors = layer(TOKEN_IDS)  # a top-level call: Keras autocasts the other variables there
    assert keras.backend.standardize_dtype(vectors.dtype) == "bfloat16"
    np.testing.assert_array_equal(tf.cast(vectors, tf.float32), tf.cast(layer.embeddings.numpy()[TOKEN_IDS],
                                                                          tf.bfloat16))
    seen = []

    class Reader(keras.layers.Layer):  # a bfloat16 layer reading the table (as the LM head does)
        def call(self, x):
            seen.append(keras.backend.standardize_dtype(ops.convert_to_tensor(layer.embeddings).dtype))
            return x

    Reader(dtype="mixed_bfloat16")(np.ones((1, 2), "float32"))
    assert seen == ["float32"]
