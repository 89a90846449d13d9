"""Train-step options: mixed precision (with loss scaling) and gradient accumulation."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import as_dataset, synthetic_batches, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers import build_optimizer


def _model(dtype=None, **config):
    keras.utils.set_random_seed(0)
    return XLNetPretrainer(XLNetBackbone(tiny_config(**config), dtype=dtype))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_with_float32_weights(policy):
    model = _model(dtype=policy)
    model.compile(optimizer=build_optimizer(model, learning_rate=1e-2, warmup_steps=1,
                                             train_steps=10,
                                             loss_scaling=policy == "mixed_float16"))
    model.enable_recurrence_memory(4)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(as_dataset(synthetic_batches(2, 4)).batch(4), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(w.dtype == np.float32 for w in model.get_weights())
    assert model.recurrence_memory.local_values()[0].dtype == (
        np.float16 if policy == "mixed_float16" else tf.bfloat16.as_numpy_dtype)
    assert sum(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), before)) > 10
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def test_gradient_accumulation_equals_one_big_batch():
    # Every row has all targets real, so the mean over 2 micro-batches of 2 rows is the
    # mean over the 4 rows, and one accumulated update equals one update on the full batch.
    batches = synthetic_batches(1, 4, seed=3)
    batches[0]["target_mask"][:] = 1.0
    big = _model(memory_length=0)
    small = _model(memory_length=0)
    small.set_weights(big.get_weights())
    big.compile(optimizer=build_optimizer(big, learning_rate=1e-2, warmup_steps=0, train_steps=10))
    small.compile(optimizer=build_optimizer(small, learning_rate=1e-2, warmup_steps=0,
                                             train_steps=10, gradient_accumulation_steps=2))
    big.fit(as_dataset(batches).batch(4), epochs=1, verbose=0)
    small.fit(as_dataset(batches).batch(2), epochs=1, verbose=0)
    for a, b in zip(big.get_weights(), small.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
