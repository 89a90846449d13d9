"""A task model's `fit` and `evaluate` on token ids under two MirroredStrategy replicas: as on one device.

Keras' TensorFlow trainer builds a model under a multi-replica strategy from the mean of the
replicas' first batches, which made float64 "ids" of the integer token ids (the id check then
refused them); `FirstReplicaBuild` builds from the first replica's batch instead.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_two_cpu_devices
from xlnet_tf import XLNetBackbone, XLNetClassifier, XLNetConfig

CONFIG = XLNetConfig(vocabulary_size=64, num_layers=1, num_heads=2, head_dim=8, hidden_dim=16,
                     intermediate_dim=32, dropout=0.0, attention_dropout=0.0)


def _two_replicas(devices):
    # Reduced through one device, not by collective ops: TensorFlow keys a process's collective
    # ops by device group and a counter that every new strategy starts again, so collectives of
    # this test's shapes would clash with those of a later test's strategy on the same devices.
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())


def _data():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 60, (8, 6)).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    return x, rng.integers(0, 2, (8,)).astype("int32")


def _fit(strategy, as_dataset):
    x, y = _data()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=2, preprocessor=None, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if as_dataset:
        history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=2, verbose=0)
    else:
        history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return history.history["loss"], model.get_weights()


@pytest.mark.parametrize("as_dataset", [False, True], ids=["arrays", "dataset"])
def test_two_replicas_train_a_classifier_as_one_device_does(as_dataset):
    devices = assert_two_cpu_devices()
    one_losses, one_weights = _fit(tf.distribute.OneDeviceStrategy(devices[0]), as_dataset)
    two_losses, two_weights = _fit(_two_replicas(devices), as_dataset)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)
    assert one_losses[1] != one_losses[0]  # the first epoch's updates changed the second's loss
    for two, one in zip(two_weights, one_weights):
        np.testing.assert_allclose(two, one, atol=1e-5)


def _evaluate_fresh(strategy):
    x, y = _data()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=2, preprocessor=None, dropout=0.0)
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    return model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)


def test_two_replicas_evaluate_an_unbuilt_classifier_as_one_device_does():
    devices = assert_two_cpu_devices()
    one = _evaluate_fresh(tf.distribute.OneDeviceStrategy(devices[0]))
    two = _evaluate_fresh(_two_replicas(devices))
    assert set(two) == set(one) == {"loss", "sparse_categorical_accuracy"}
    for key in one:
        np.testing.assert_allclose(two[key], one[key], rtol=1e-5, err_msg=key)
