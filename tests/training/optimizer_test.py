"""The fused (in-place kernel) AdamW update equals Keras' AdamW: clipping, decay exclusions, replicas, accumulation;
so does the fused Muon step on the blocks' kernels."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import as_dataset, synthetic_batches, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers import build_optimizer
from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW


def _variables():
    rng = np.random.default_rng(0)
    return [keras.Variable(rng.standard_normal(shape).astype("float32"), name=name)
            for shape, name in (((6, 4), "kernel"), ((4,), "bias"), ((3, 5), "embeddings"))]


def _traced_apply(optimizer, variables):
    """`optimizer.apply` on `variables` as one traced function, the way `fit` runs it."""
    return tf.function(lambda gradients: optimizer.apply(gradients, variables))


def _gradients(step):
    rng = np.random.default_rng(100 + step)
    return [tf.constant(rng.standard_normal(shape).astype("float32") * 5.0)
            for shape in ((6, 4), (4,), (3, 5))]


@pytest.mark.parametrize("clip", [None, 1.0])
def test_fused_update_matches_keras_adamw_over_steps(clip):
    results = {}
    for fused in (True, False):
        variables = _variables()
        optimizer = AllReducedAdamW(fused=fused, learning_rate=0.05, weight_decay=0.1,
                                    epsilon=1e-6, global_clipnorm=clip)
        optimizer.exclude_from_weight_decay(var_list=[variables[1]])
        optimizer.build(variables)
        apply = _traced_apply(optimizer, variables)
        for step in range(4):
            apply(_gradients(step))
        results[fused] = [v.numpy() for v in variables]
        graph = apply.get_concrete_function(_gradients(0)).graph
        op_types = [op.type for op in graph.get_operations()]
        # The fused path really ran: one in-place Adam kernel per variable, no Keras update.
        assert op_types.count("ResourceApplyAdam") == (len(variables) if fused else 0)
        results[fused, "m"] = [m.numpy() for m in optimizer._momentums]
        results[fused, "v"] = [v.numpy() for v in optimizer._velocities]
    # The kernel forms 1 - beta_2 from float32(0.999) (Keras from the Python float): 1.3e-5 apart.
    for key in ("m", "v"):
        for a, b in zip(results[True, key], results[False, key]):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-7)
    for a, b in zip(results[True], results[False]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The clip and the decay really acted: without them the variables end elsewhere.
    plain = _variables()
    optimizer = keras.optimizers.Adam(learning_rate=0.05, epsilon=1e-6)
    for step in range(4):
        optimizer.apply(_gradients(step), plain)
    assert np.abs(plain[0].numpy() - results[True][0]).max() > 1e-3
    # The excluded bias follows plain Adam (its gradients' clip aside) only when not clipped.
    if clip is None:
        np.testing.assert_allclose(plain[1].numpy(), results[True][1], rtol=1e-5, atol=1e-6)


def test_fused_update_propagates_non_finite_gradients_as_keras_does():
    variables = _variables()
    optimizer = AllReducedAdamW(learning_rate=0.05, weight_decay=0.0, global_clipnorm=1.0)
    gradients = _gradients(0)
    gradients[1] = tf.constant([np.inf, 0.0, 0.0, 0.0])
    optimizer.apply(gradients, variables)
    assert np.isnan(variables[0].numpy()).all()


def test_config_round_trip_keeps_fused():
    optimizer = AllReducedAdamW(fused=False, learning_rate=0.1)
    restored = AllReducedAdamW.from_config(optimizer.get_config())
    assert restored.fused is False and AllReducedAdamW().fused is True


def _train(fused, strategy=None, accumulation_steps=1, batch_size=4, algorithm="adamw"):
    batches = synthetic_batches(2, 4, seed=5)
    with (strategy or tf.distribute.get_strategy()).scope():
        keras.utils.set_random_seed(0)
        model = XLNetPretrainer(XLNetBackbone(tiny_config()))
        # A tiny clip norm so every step is clipped by the global norm.
        model.compile(optimizer=build_optimizer(
            model, learning_rate=1e-2, warmup_steps=1, train_steps=10, clip_norm=0.05,
            gradient_accumulation_steps=accumulation_steps, fused=fused, algorithm=algorithm))
        model.enable_recurrence_memory(batch_size // (strategy.num_replicas_in_sync if strategy else 1))
    model.fit(as_dataset(batches).batch(batch_size), epochs=1, verbose=0, shuffle=False)
    return model.get_weights()


def _assert_same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["adamw", "muon"])
def test_fused_fit_matches_keras_update_on_one_device(algorithm):
    _assert_same(_train(True, algorithm=algorithm), _train(False, algorithm=algorithm))


def test_fused_fit_matches_keras_update_with_accumulation():
    _assert_same(_train(True, accumulation_steps=2, batch_size=2),
                 _train(False, accumulation_steps=2, batch_size=2))


@pytest.mark.large
@pytest.mark.parametrize("algorithm", ["adamw", "muon"])
def test_fused_fit_on_two_replicas_matches_one_device(two_cpu_devices, algorithm):
    strategy = tf.distribute.MirroredStrategy(two_cpu_devices)
    _assert_same(_train(True, strategy, algorithm=algorithm), _train(False, algorithm=algorithm))
    if algorithm == "muon":  # Muon's step really ran: the weights end elsewhere than AdamW's
        assert max(np.abs(a - b).max() for a, b in zip(_train(True), _train(True, algorithm="muon"))) > 1e-3
