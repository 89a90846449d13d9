"""One device vs. two MirroredStrategy replicas: same global batch, same loss, same weights."""

import keras
import numpy as np
import tensorflow as tf

from tests.training.helpers import as_dataset, require_two_cpus, synthetic_batches, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.training import create_optimizer

GLOBAL_BATCH = 4
STEPS = 3


def _train(strategy, batches, memory, weights=None, clip_norm=1.0):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = XLNetPretrainer(XLNetBackbone(tiny_config()))
        if weights is not None:
            model.set_weights(weights)
        model.compile(optimizer=create_optimizer(
            model, learning_rate=1e-2, warmup_steps=1, train_steps=10, clip_norm=clip_norm),
            jit_compile=False)
        if memory:
            model.enable_recurrence_memory(GLOBAL_BATCH // strategy.num_replicas_in_sync)
    initial = [w.copy() for w in model.get_weights()]
    losses = []
    log_loss = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"])))
    model.fit(as_dataset(batches).batch(GLOBAL_BATCH), epochs=1, verbose=0, shuffle=False,
              callbacks=[log_loss])
    assert len(losses) == len(batches)
    return model, initial, losses


def _compare(memory, clip_norm=1.0):
    require_two_cpus()
    batches = synthetic_batches(STEPS, GLOBAL_BATCH, seed=1)
    single, initial, single_losses = _train(
        tf.distribute.OneDeviceStrategy("/cpu:0"), batches, memory, clip_norm=clip_norm)
    mirrored, _, mirrored_losses = _train(
        tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), batches, memory, weights=initial,
        clip_norm=clip_norm)
    np.testing.assert_allclose(mirrored_losses, single_losses, rtol=1e-5, atol=1e-6)
    moved = 0
    for a, b, w0 in zip(single.get_weights(), mirrored.get_weights(), initial):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
        moved += np.abs(a - w0).sum() > 0
    assert moved > 10  # The comparison is about real updates, not untouched weights.
    return single, mirrored


def test_one_device_and_two_replicas_agree_without_memory():
    _compare(memory=False)


def test_one_device_and_two_replicas_agree_with_memory():
    single, mirrored = _compare(memory=True)
    # The per-replica memories are the two halves of the single device's memory.
    whole = single.recurrence_memory.local_values()[0]
    halves = mirrored.recurrence_memory.local_values()
    assert len(halves) == 2
    np.testing.assert_allclose(np.concatenate(halves, 0), whole, rtol=1e-4, atol=1e-6)
    assert np.abs(whole).sum() > 0


def test_global_norm_clipping_uses_the_global_gradient():
    # A tiny clip norm makes every step clipped: per-replica clipping would differ.
    _compare(memory=False, clip_norm=1e-3)
