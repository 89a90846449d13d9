"""Rematerialization: same gradients, same dropout masks in both runs, same weights layout."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config, tiny_two_stream_inputs
from xlnet_tf.layers.xlnet_block import XLNetBlock
from xlnet_tf.models import xlnet_backbone
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer


def _config(dropout=0.0, **overrides):
    return tiny_config(**dict(dict(dropout=dropout, attention_dropout=dropout, memory_length=4, reuse_length=3),
                              **overrides))


def _inputs(seed=0):
    return tiny_two_stream_inputs(_config(), batch_size=2, sequence_length=6, num_predict=3, seed=seed)


def _loss_and_gradients(backbone, inputs):
    with tf.GradientTape() as tape:
        outputs = backbone(inputs, training=True)
        loss = (tf.reduce_sum(tf.square(outputs["query_output"]))
                + tf.reduce_sum(outputs["sequence_output"] * 0.5))
    gradients = tape.gradient(loss, backbone.trainable_variables)
    return float(loss), [tf.convert_to_tensor(g).numpy() for g in gradients]


def _assert_gradients_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _pair(dropout):
    keras.utils.set_random_seed(0)
    plain = XLNetBackbone(_config(dropout))
    remat = XLNetBackbone(_config(dropout), rematerialize=True)
    remat.set_weights(plain.get_weights())
    return plain, remat


def test_without_dropout_rematerialized_gradients_equal_plain_ones():
    plain, remat = _pair(0.0)
    inputs = _inputs()
    loss_a, grads_a = _loss_and_gradients(plain, inputs)
    loss_b, grads_b = _loss_and_gradients(remat, inputs)
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    assert all(np.abs(g).max() > 0 for g in grads_b[:3])
    _assert_gradients_equal(grads_a, grads_b)


def test_with_dropout_the_recomputed_pass_draws_the_same_masks(monkeypatch):
    # Gradients through tf.recompute_grad must equal those of one forward pass that uses
    # the same seeds; with masks redrawn in the second run they would not.
    _, remat = _pair(0.3)
    inputs = _inputs(seed=1)
    generator = remat.embedding_dropout.seed_generator
    state = generator.state.numpy()
    loss_remat, grads_remat = _loss_and_gradients(remat, inputs)
    generator.state.assign(state)
    monkeypatch.setattr(xlnet_backbone, "_recompute_grad", lambda f: f)
    loss_once, grads_once = _loss_and_gradients(remat, inputs)
    assert loss_remat == pytest.approx(loss_once, rel=1e-6)
    _assert_gradients_equal(grads_remat, grads_once)
    # Dropout is really on: a fresh seed gives another loss.
    loss_other, _ = _loss_and_gradients(remat, inputs)
    assert abs(loss_other - loss_once) > 1e-4


def test_each_block_runs_again_in_the_backward_pass(monkeypatch):
    calls = []
    original = XLNetBlock.call

    @functools.wraps(original)  # Keras reads the call signature (its bool stack_streams argument)
    def counting_call(self, *args, **kwargs):
        calls.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(XLNetBlock, "call", counting_call)
    plain, remat = _pair(0.1)
    calls.clear()
    _loss_and_gradients(plain, _inputs())
    assert sorted(calls) == ["block_0", "block_1"]
    calls.clear()
    _loss_and_gradients(remat, _inputs())
    assert sorted(calls) == ["block_0", "block_0", "block_1", "block_1"]
    calls.clear()
    remat(_inputs(), training=False)  # inference is never rematerialized
    assert sorted(calls) == ["block_0", "block_1"]


def test_config_round_trip_and_weights_layout_unchanged(tmp_path):
    plain, remat = _pair(0.1)
    restored = XLNetBackbone.from_config(remat.get_config())
    assert restored.rematerialize is True
    assert XLNetBackbone.from_config(plain.get_config()).rematerialize is False
    plain.save_weights(str(tmp_path / "plain.weights.h5"))
    restored.load_weights(str(tmp_path / "plain.weights.h5"))
    for a, b in zip(plain.get_weights(), restored.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.large
@pytest.mark.parametrize("jit_compile", [False, True])
def test_rematerialized_fit_matches_plain_fit(jit_compile):
    from tests.training.helpers import as_dataset, synthetic_batches

    histories, weights = [], []
    for rematerialize in (False, True):
        keras.utils.set_random_seed(0)
        config = _config(0.0, memory_length=0, reuse_length=0)
        model = XLNetPretrainer(XLNetBackbone(config, rematerialize=rematerialize))
        model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit_compile)
        batches = synthetic_batches(2, 2, seed=4)
        history = model.fit(as_dataset(batches).batch(2), epochs=1, verbose=0, shuffle=False)
        histories.append(history.history["loss"][0])
        weights.append(model.get_weights())
    assert histories[0] == pytest.approx(histories[1], rel=1e-5)
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
