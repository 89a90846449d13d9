"""The per-backend seeded-random primitives on TensorFlow, and `traced_step`: today's Philox bits and seeds."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.layers import seeded_dropout, seeded_random


def test_fold_in_is_tensorflows_and_keeps_the_data_dtype():
    seed = tf.constant([3, 9], tf.int64)
    for data in (5, tf.constant(5, tf.int64), tf.constant(7, tf.int32)):
        folded = seeded_random.fold_in(seed, data)
        expected = tf.random.experimental.stateless_fold_in(seed, data)
        assert folded.dtype == expected.dtype
        np.testing.assert_array_equal(folded.numpy(), expected.numpy())
    # An int32 seed (a Python-int fold's result) is folded as int64, as `sub_seed` always did.
    int32_seed = seeded_random.fold_in(seed, 1)
    np.testing.assert_array_equal(
        seeded_random.fold_in(int32_seed, 2).numpy(),
        tf.random.experimental.stateless_fold_in(tf.cast(int32_seed, tf.int64), 2).numpy())


def test_random_bits_are_philox_bits_with_and_without_xla():
    seed = tf.constant([1, 2], tf.int64)
    expected = tf.random.stateless_uniform([3, 5], seed=seed, minval=None, maxval=None, dtype=tf.uint32,
                                           alg="philox")
    np.testing.assert_array_equal(seeded_random.random_bits([3, 5], seed).numpy(), expected.numpy())
    compiled = tf.function(lambda s: seeded_random.random_bits(tf.constant([3, 5]), s), jit_compile=True)(seed)
    np.testing.assert_array_equal(compiled.numpy(), expected.numpy())
    np.testing.assert_array_equal(seeded_dropout.stateless_random_bits([3, 5], seed).numpy(), expected.numpy())


def test_step_seed_is_the_int64_fold_of_run_seed_step_and_replica():
    run_seed = 2 ** 40 + 77
    base = tf.constant([run_seed & 0x7FFFFFFF, (run_seed >> 31) & 0x7FFFFFFF], tf.int64)
    expected = tf.random.experimental.stateless_fold_in(
        tf.random.experimental.stateless_fold_in(base, tf.constant(4, tf.int64)), tf.constant(0, tf.int64))
    np.testing.assert_array_equal(seeded_dropout.step_dropout_seed(run_seed, tf.constant(4, tf.int64)).numpy(),
                                  expected.numpy())


class _Model:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.dropout_run_seed = 13


def _optimizer():
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    optimizer.build([keras.Variable(np.zeros(2, "float32"))])
    seeded_dropout.micro_batch_counter(optimizer).assign(3)
    return optimizer


def test_traced_step_wins_over_the_counter_and_nests():
    model = _Model(_optimizer())
    counter_seed = seeded_dropout.training_dropout_seed(model, True).numpy()
    np.testing.assert_array_equal(counter_seed, seeded_dropout.step_dropout_seed(13, 3).numpy())
    with seeded_dropout.traced_step(tf.constant(8, tf.int64)):
        traced = seeded_dropout.training_dropout_seed(model, True).numpy()
        with seeded_dropout.traced_step(9):
            inner = seeded_dropout.training_dropout_seed(model, True).numpy()
        assert seeded_dropout.current_traced_step().numpy() == 8
        assert seeded_dropout.training_dropout_seed(model, False) is None
    assert seeded_dropout.current_traced_step() is None
    np.testing.assert_array_equal(traced, seeded_dropout.step_dropout_seed(13, 8).numpy())
    np.testing.assert_array_equal(inner, seeded_dropout.step_dropout_seed(13, 9).numpy())
    # Without an optimizer: stateful dropout (None), unless a traced step is set.
    assert seeded_dropout.training_dropout_seed(_Model(None), True) is None
    with seeded_dropout.traced_step(8):
        np.testing.assert_array_equal(seeded_dropout.training_dropout_seed(_Model(None), True).numpy(), traced)


def test_traced_step_inside_a_traced_function():
    model = _Model(_optimizer())

    @tf.function
    def seed_of(step):
        with seeded_dropout.traced_step(step):
            return seeded_dropout.training_dropout_seed(model, True)

    for step in (5, 6):
        np.testing.assert_array_equal(seed_of(tf.constant(step, tf.int64)).numpy(),
                                      seeded_dropout.step_dropout_seed(13, step).numpy())


def test_counter_value_is_picked_from_the_optimizer_state():
    optimizer = _optimizer()
    values = [variable.numpy() for variable in optimizer.variables]
    assert int(seeded_dropout.micro_batch_counter_value(optimizer, values)) == 3
    with pytest.raises(ValueError, match="optimizer values for"):
        seeded_dropout.micro_batch_counter_value(optimizer, values[:-1])
