"""The stateless dropout behind every seeded dropout site: rate, scale, seed purity, XLA equality."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.layers.seeded_dropout import apply_dropout

# Built here, outside the traced functions below.
_LAYERS = {rate: keras.layers.Dropout(rate) for rate in (0.1, 0.3, 0.5)}


def seeded_dropout(inputs, rate, seed):
    """A seeded dropout site in training: `apply_dropout` of a Dropout layer of `rate`."""
    return apply_dropout(_LAYERS[rate], inputs, True, seed)


def test_rate_and_scale():
    x = tf.ones((64, 1000))
    y = seeded_dropout(x, 0.1, tf.constant([5, 6], tf.int64)).numpy()
    dropped = np.mean(y == 0)
    assert abs(dropped - 0.1) < 0.01
    np.testing.assert_allclose(y[y != 0], 1.0 / 0.9, rtol=1e-6)


def test_mask_is_a_pure_function_of_the_seed():
    x = tf.ones((8, 300))
    a = seeded_dropout(x, 0.5, tf.constant([1, 2], tf.int64)).numpy()
    b = seeded_dropout(x, 0.5, tf.constant([1, 2], tf.int64)).numpy()
    c = seeded_dropout(x, 0.5, tf.constant([1, 3], tf.int64)).numpy()
    np.testing.assert_array_equal(a, b)
    assert np.mean(a != c) > 0.3


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_xla_draws_the_same_mask(dtype):
    # Philox is counter-based in TensorFlow's kernel and in XLA: a step compiled with
    # jit_compile drops exactly the units the plain step drops.
    x = tf.cast(tf.random.stateless_normal((2, 3, 16, 40), seed=[0, 1]), dtype)
    seed = tf.constant([9, 4], tf.int64)
    plain = seeded_dropout(x, 0.1, seed)
    compiled = tf.function(lambda x, s: seeded_dropout(x, 0.1, s), jit_compile=True)(x, seed)
    np.testing.assert_array_equal(plain.numpy().astype("float32"),
                                  compiled.numpy().astype("float32"))


def test_gradient_is_the_mask_times_the_scale():
    x = tf.random.stateless_normal((4, 50), seed=[2, 2])
    seed = tf.constant([3, 3], tf.int64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = seeded_dropout(x, 0.3, seed)
        total = tf.reduce_sum(y)
    gradient = tape.gradient(total, x).numpy()
    kept = y.numpy() != 0
    np.testing.assert_allclose(gradient[kept], 1.0 / 0.7, rtol=1e-6)
    assert np.all(gradient[~kept] == 0)


@pytest.mark.parametrize("shape", [(5, 7), (3, 1), (2, 4, 33)])
def test_odd_last_axis_keeps_rate_and_xla_mask(shape):
    # Each 32-bit draw decides two units; an odd last axis drops the spare half.
    x = tf.ones(shape)
    seed = tf.constant([7, 8], tf.int64)
    plain = seeded_dropout(x, 0.5, seed).numpy()
    compiled = tf.function(lambda x, s: seeded_dropout(x, 0.5, s), jit_compile=True)(x, seed).numpy()
    assert plain.shape == shape
    np.testing.assert_array_equal(plain, compiled)
    big = seeded_dropout(tf.ones((400,) + shape), 0.5, seed).numpy()
    assert abs(np.mean(big == 0) - 0.5) < 0.02


def test_unknown_last_axis_draws_the_eager_mask():
    x = tf.random.stateless_normal((3, 5), seed=[1, 1])
    seed = tf.constant([2, 9], tf.int64)
    traced = tf.function(lambda x, s: seeded_dropout(x, 0.3, s),
                         input_signature=[tf.TensorSpec([None, None]), tf.TensorSpec([2], tf.int64)])
    np.testing.assert_array_equal(traced(x, seed).numpy(), seeded_dropout(x, 0.3, seed).numpy())


def test_unscaled_dropout_times_its_scale_is_the_dropout():
    import keras

    from xlnet_tf.layers.seeded_dropout import apply_dropout, apply_unscaled_dropout

    layer = keras.layers.Dropout(0.2)
    x = tf.random.stateless_normal((3, 64), seed=[4, 4])
    seed = tf.constant([8, 1], tf.int64)
    dropped, scale = apply_unscaled_dropout(layer, x, True, seed, site=5)
    assert scale == 1.0 / 0.8
    kept = dropped.numpy() != 0
    np.testing.assert_array_equal(dropped.numpy()[kept], x.numpy()[kept])  # unscaled
    np.testing.assert_allclose(dropped.numpy() * scale, apply_dropout(layer, x, True, seed, site=5).numpy(),
                               rtol=1e-6)
    # Nothing dropped outside training; Keras' own layer (no seed) scales itself.
    assert apply_unscaled_dropout(layer, x, False, seed)[1] == 1.0
    own, own_scale = apply_unscaled_dropout(layer, x, True)
    assert own_scale == 1.0 and set(np.round(own.numpy()[own.numpy() != 0] / x.numpy()[own.numpy() != 0], 4)) == {1.25}


@pytest.mark.parametrize("shape", [(3, 10), (2, 7)])
def test_mask_is_sixteen_bit_halves_of_the_philox_draws(shape):
    # Unit j < ceil(last / 2) is kept when the low 16 bits of draw j reach the threshold,
    # unit ceil(last / 2) + j when the high 16 bits of draw j do: the masks a step drew before
    # the halves were compared apart, so runs resumed across this change keep their masks.
    seed = tf.constant([6, 5], tf.int64)
    half = (shape[-1] + 1) // 2
    bits = tf.random.stateless_uniform(shape[:-1] + (half,), seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32, alg="philox").numpy().astype(np.int64)
    threshold = round(0.3 * 2 ** 16)
    expected = np.concatenate([(bits & 0xFFFF) >= threshold, (bits >> 16) >= threshold], axis=-1)
    expected = expected[..., :shape[-1]]
    from xlnet_tf.layers.seeded_dropout import stateless_keep_mask

    kept = stateless_keep_mask(tf.zeros(shape), 0.3, seed).numpy()
    np.testing.assert_array_equal(kept, expected)


@pytest.mark.parametrize("last", [8, 7])
def test_stacked_dropout_drops_each_part_as_alone(last):
    from xlnet_tf.layers.seeded_dropout import apply_dropout, apply_stacked_dropout

    layer = keras.layers.Dropout(0.3)
    seed = tf.constant([11, 12], tf.int64)
    content = tf.random.normal((2, 5, last))
    query = tf.random.normal((2, 3, last))
    stacked = tf.concat([content, query], axis=1)
    expected = tf.concat([apply_dropout(layer, content, True, seed, 4),
                          apply_dropout(layer, query, True, seed, 6)], axis=1)
    np.testing.assert_array_equal(apply_stacked_dropout(layer, stacked, [5, 3], True, seed, (4, 6)),
                                  expected)
    # Lengths known only as tensors (dynamic shapes) give the same mask.
    dynamic = tf.function(lambda x, n: apply_stacked_dropout(layer, x, [n, 3], True, seed, (4, 6)),
                          input_signature=[tf.TensorSpec([2, None, last]), tf.TensorSpec([], tf.int32)])
    np.testing.assert_array_equal(dynamic(stacked, tf.constant(5)), expected)
    # One part is apply_dropout itself; nothing is dropped outside training.
    np.testing.assert_array_equal(apply_stacked_dropout(layer, content, [5], True, seed, (4,)),
                                  apply_dropout(layer, content, True, seed, 4))
    np.testing.assert_array_equal(apply_stacked_dropout(layer, stacked, [5, 3], False, seed, (4, 6)),
                                  stacked)


def test_stacked_dropout_keeps_static_shapes_and_refuses_mismatched_sites():
    from xlnet_tf.layers.seeded_dropout import apply_stacked_dropout

    layer = keras.layers.Dropout(0.5)
    seed = tf.constant([1, 2], tf.int64)
    shapes = []
    traced = tf.function(lambda x: shapes.append(
        apply_stacked_dropout(layer, x, [4, 2], True, seed, (4, 6)).shape) or 0)
    traced(tf.zeros((3, 6, 5)))
    assert shapes == [tf.TensorShape([3, 6, 5])]
    with pytest.raises(ValueError, match="2 lengths for 1 sites"):
        apply_stacked_dropout(layer, tf.zeros((1, 6, 5)), [4, 2], True, seed, (4,))
