"""Step-seeded dropout: masks are a function of (run seed, micro-batch counter, replica).

A resumed run restores weights, optimizer state and the optimizer's counter,
so with these seeds it draws the masks of the uninterrupted run.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import as_dataset, compiled_for_batches_of_two, synthetic_batches, tiny_config
from xlnet_tf.layers.seeded_dropout import micro_batch_counter, step_dropout_seed
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import BACKBONE_INPUTS, XLNetPretrainer

DROPOUT = dict(dropout=0.3, attention_dropout=0.3, memory_length=0, reuse_length=0)


def _pretrainer(optimizer=None, run_seed=None, **config):
    keras.utils.set_random_seed(0)
    model = XLNetPretrainer(XLNetBackbone(tiny_config(**{**DROPOUT, **config})))
    if run_seed is not None:
        model.backbone.dropout_run_seed = run_seed
    if optimizer is not None:
        model.compile(optimizer=optimizer)
        model.set_static_batch_size(2)
    return model


def _features(batch):
    return {k: v for k, v in batch.items() if k in BACKBONE_INPUTS}


def test_same_step_same_masks_next_step_other_masks():
    # Learning rate 0: the weights stay, only the counter moves, so the loss shows the masks.
    model = _pretrainer(keras.optimizers.SGD(learning_rate=0.0))
    batch = synthetic_batches(1, 2, seed=3)[0]
    first = model.train_on_batch(batch, return_dict=True)["loss"]
    second = model.train_on_batch(batch, return_dict=True)["loss"]
    assert int(micro_batch_counter(model.optimizer).numpy()) == 2
    micro_batch_counter(model.optimizer).assign(0)
    again = model.train_on_batch(batch, return_dict=True)["loss"]
    assert again == first
    assert abs(second - first) > 1e-4
    # The model's own training call at a step uses that step's masks too.
    logits = [model(_features(batch), training=True)["logits"].numpy() for _ in range(2)]
    np.testing.assert_array_equal(logits[0], logits[1])


def test_inference_is_unchanged():
    model = _pretrainer(keras.optimizers.SGD(learning_rate=0.0))
    without_dropout = _pretrainer(dropout=0.0, attention_dropout=0.0)
    without_dropout.set_weights(model.get_weights())
    micro_batch_counter(model.optimizer).assign(5)
    features = _features(synthetic_batches(1, 2, seed=3)[0])
    np.testing.assert_array_equal(model(features, training=False)["logits"].numpy(),
                                  without_dropout(features, training=False)["logits"].numpy())
    trained = model(features, training=True)["logits"].numpy()
    assert np.abs(trained - model(features, training=False)["logits"].numpy()).max() > 1e-3


def test_replicas_draw_different_masks(two_cpu_devices):
    strategy = tf.distribute.MirroredStrategy(two_cpu_devices)
    seeds = strategy.run(lambda: step_dropout_seed(7, tf.constant(3, tf.int64)))
    replica_0, replica_1 = [s.numpy() for s in strategy.experimental_local_results(seeds)]
    assert (replica_0 != replica_1).any()
    # One device is replica 0.
    np.testing.assert_array_equal(replica_0, step_dropout_seed(7, tf.constant(3, tf.int64)).numpy())
    with strategy.scope():
        model = _pretrainer(keras.optimizers.SGD(learning_rate=0.0))
    features = _features(synthetic_batches(1, 2, seed=3)[0])
    logits = strategy.run(lambda x: model(x, training=True)["logits"], args=(features,))
    replica_0, replica_1 = [t.numpy() for t in strategy.experimental_local_results(logits)]
    assert np.abs(replica_0 - replica_1).max() > 1e-3


def _fit(model, batches, jit_compile=False, steps_per_execution=1):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    model.set_static_batch_size(2)
    model.fit(as_dataset(batches).batch(2), epochs=1, verbose=0, shuffle=False)
    return model.get_weights()


# Rematerialization under XLA compiles for over a minute on CPU; without XLA it shows the same.
@pytest.mark.large
@pytest.mark.parametrize("jit_compile,rematerialize", [(False, True), (True, False)])
def test_steps_per_execution_and_rematerialization_keep_the_masks(jit_compile, rematerialize):
    batches = synthetic_batches(4, 2, seed=4)
    one_step = _fit(_pretrainer(num_layers=1), batches, jit_compile)
    looped = _pretrainer(num_layers=1)
    looped.backbone.rematerialize = rematerialize
    looped = _fit(looped, batches, jit_compile, steps_per_execution=2)
    for a, b in zip(one_step, looped):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _accumulating(model):
    return compiled_for_batches_of_two(model, gradient_accumulation_steps=2)


@pytest.mark.large
def test_resumed_pretraining_with_accumulation_equals_uninterrupted(tmp_path):
    batches = synthetic_batches(8, 2, seed=5)
    reference = _accumulating(_pretrainer())
    reference.fit(as_dataset(batches).batch(2), epochs=1, verbose=0, shuffle=False)

    first = _accumulating(_pretrainer())
    first.fit(as_dataset(batches[:4]).batch(2), epochs=1, verbose=0, shuffle=False)
    path = str(tmp_path / "backup.weights.h5")
    first.save_weights(path)
    resumed = _accumulating(_pretrainer())
    resumed.load_weights(path)
    assert int(micro_batch_counter(resumed.optimizer).numpy()) == 4
    resumed.fit(as_dataset(batches[4:]).batch(2), epochs=1, verbose=0, shuffle=False)
    for a, b in zip(reference.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
