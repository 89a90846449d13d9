"""Saving and restoring each replica's recurrence memory, and the errors when it does not fit."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.models.recurrence_memory import RecurrenceMemory

SHAPE = dict(per_replica_batch_size=2, num_layers=1, memory_length=3, hidden_dim=4)


@pytest.fixture
def mirrored(two_cpu_devices):
    return tf.distribute.MirroredStrategy(two_cpu_devices)


def _filled(strategy):
    memory = RecurrenceMemory(strategy=strategy, **SHAPE)

    def write():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        memory.write(tf.fill(memory.shape, tf.cast(replica, tf.float32) + 1.5))

    for _ in range(3):
        strategy.run(write)
    return memory


def test_each_replica_gets_its_own_memory_back(tmp_path, mirrored):
    strategy = mirrored
    memory = _filled(strategy)
    path = str(tmp_path / "memory.npz")
    memory.save(path)
    restored = RecurrenceMemory(strategy=strategy, **SHAPE)
    assert restored.restore(path) == 3
    values = restored.local_values()
    assert [float(v.mean()) for v in values] == [1.5, 2.5]
    for a, b in zip(values, memory.local_values()):
        np.testing.assert_array_equal(a, b)
    steps = strategy.experimental_local_results(restored.step)
    assert [int(s.numpy()) for s in steps] == [3, 3]


def test_a_memory_that_does_not_fit_is_refused_by_name(tmp_path, mirrored):
    strategy = mirrored
    path = str(tmp_path / "memory.npz")
    _filled(strategy).save(path)
    other_shape = RecurrenceMemory(strategy=strategy, **dict(SHAPE, memory_length=5))
    with pytest.raises(ValueError, match=r"memory\.npz: memory of shape \(2, 1, 3, 4\).*\(2, 1, 5, 4\)"):
        other_shape.restore(path)
    one_replica = RecurrenceMemory(strategy=tf.distribute.OneDeviceStrategy("/cpu:0"), **SHAPE)
    with pytest.raises(ValueError, match="memory of 2 local replica"):
        one_replica.restore(path)
    assert float(np.abs(one_replica.local_values()[0]).max()) == 0.0
