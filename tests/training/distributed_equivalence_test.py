"""One device vs. two MirroredStrategy replicas: same global batch, same loss, same weights.

Both runs train with recurrence memory on, uneven target counts per replica
(so the global-batch normalisation matters) and a clip norm small enough that
every step is clipped (so per-replica clipping would show). The trainings run
once per module; the tests read what they recorded.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import as_dataset, synthetic_batches, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import BACKBONE_INPUTS, XLNetPretrainer
from xlnet_tf.optimizers import build_optimizer

GLOBAL_BATCH = 4
STEPS = 3


class _Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses, self.weights_before, self.memories = [], [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.weights_before.append([w.copy() for w in self.model.get_weights()])

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))
        self.memories.append(self.model.recurrence_memory.local_values())


def _train(strategy, batches, weights=None):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = XLNetPretrainer(XLNetBackbone(tiny_config()))
        if weights is not None:
            model.set_weights(weights)
        model.compile(optimizer=build_optimizer(
            model, learning_rate=1e-2, warmup_steps=1, train_steps=10, clip_norm=1e-3))
        model.enable_recurrence_memory(GLOBAL_BATCH // strategy.num_replicas_in_sync)
    initial = [w.copy() for w in model.get_weights()]
    recorder = _Recorder()
    model.fit(as_dataset(batches).batch(GLOBAL_BATCH), epochs=1, verbose=0, shuffle=False,
              callbacks=[recorder])
    assert len(recorder.losses) == len(batches)
    return model, initial, recorder


@pytest.fixture(scope="module")
def runs(two_cpu_devices):
    batches = synthetic_batches(STEPS, GLOBAL_BATCH, seed=1)
    single = _train(tf.distribute.OneDeviceStrategy("/cpu:0"), batches)
    mirrored = _train(tf.distribute.MirroredStrategy(two_cpu_devices), batches,
                      weights=single[1])
    return batches, single, mirrored


def test_same_loss_and_same_updated_weights(runs):
    _, (single, initial, single_rec), (mirrored, _, mirrored_rec) = runs
    np.testing.assert_allclose(mirrored_rec.losses, single_rec.losses, rtol=1e-5, atol=1e-6)
    moved = 0
    for a, b, w0 in zip(single.get_weights(), mirrored.get_weights(), initial):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
        moved += np.abs(a - w0).max() > 1e-4
    assert moved > 10  # Real updates, not untouched weights.


def test_each_replica_keeps_the_memory_of_its_own_rows(runs):
    batches, (single, _, single_rec), (_, _, mirrored_rec) = runs
    half = GLOBAL_BATCH // 2
    assert all(len(m) == 2 for m in mirrored_rec.memories)
    reference = XLNetPretrainer(XLNetBackbone(tiny_config()))
    previous = [np.zeros_like(m) for m in mirrored_rec.memories[0]]
    for step, batch in enumerate(batches):
        reference.set_weights(mirrored_rec.weights_before[step])
        for replica in range(2):
            rows = slice(replica * half, (replica + 1) * half)
            inputs = {k: batch[k][rows] for k in BACKBONE_INPUTS if k in batch}
            inputs["mems"] = previous[replica]
            expected = reference(inputs, training=False)["new_mems"].numpy()
            got = mirrored_rec.memories[step][replica]
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        previous = mirrored_rec.memories[step]
        # And the two replicas together hold exactly the single device's memory.
        np.testing.assert_allclose(np.concatenate(mirrored_rec.memories[step], 0),
                                   single_rec.memories[step][0], rtol=1e-4, atol=1e-5)
    # Memory carried across steps: the last step's memory differs from a memory-less forward.
    assert np.abs(previous[0]).sum() > 0


def test_reset_zeros_every_replica(runs):
    _, _, (mirrored, _, _) = runs
    mirrored.reset_recurrence_memory()
    for value in mirrored.recurrence_memory.local_values():
        assert not value.any()
