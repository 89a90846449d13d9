"""xlnet_tf.optimizers on JAX and PyTorch give TensorFlow's updates.

The probes (`tests/backends/probes/optimizer_probes.py`) apply three updates of
fixed numpy gradients to a tiny model's fixed numpy weights with every optimizer
`build_optimizer` returns, and train it with `fit`; here each backend's
variables, after each update, are compared with TensorFlow's (its fused
`ResourceApplyAdam` path), to float32 rounding.
"""

import numpy as np
import pytest

from tests.backends.backend_harness import probe_output
from tests.backends.probes.optimizer_probes import CASES, JAX_EAGER_CASES, tiny_task

ATOL = 1e-6


def _jax_keys(case):
    keys = [f"{case}_stateless"]
    return keys + [case] if case in JAX_EAGER_CASES else keys


def _compared(backend):
    """`(key on backend, TensorFlow's key)` of every update sequence the probe gives on `backend`."""
    if backend == "jax":
        return [(key, case) for case in CASES for key in _jax_keys(case)]
    return [(case, case) for case in CASES]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_every_update_equals_tensorflows(backend_outputs, backend):
    for key, reference in _compared(backend):
        want = probe_output(backend_outputs, "tensorflow", f"optimizer_updates.{reference}")
        got = probe_output(backend_outputs, backend, f"optimizer_updates.{key}")
        assert got.shape == want.shape == (3, want.shape[1]), key
        for step in range(3):
            np.testing.assert_allclose(got[step], want[step], rtol=0, atol=ATOL, err_msg=f"{key} update {step}")
    for case in CASES:
        if backend != "jax" or case in JAX_EAGER_CASES:
            # The step count the schedule and the bias correction read (micro-batches under accumulation).
            want = probe_output(backend_outputs, "tensorflow", f"optimizer_updates.{case}_iterations")
            assert probe_output(backend_outputs, backend, f"optimizer_updates.{case}_iterations") == want, case


def test_the_compared_updates_really_act(backend_outputs):
    """Every case moves the weights at each update, but the warmup's first (rate 0); the cases differ."""
    start = np.concatenate([v.numpy().reshape(-1) for v in tiny_task().trainable_variables])
    updates = {case: probe_output(backend_outputs, "tensorflow", f"optimizer_updates.{case}") for case in CASES}
    for case, values in updates.items():
        before = np.concatenate([start[None], values[:-1]])
        moved = np.abs(values - before).max(axis=1)
        if case == "unclipped":
            np.testing.assert_array_equal(values[0], start)  # warmup: the first update's rate is 0
            moved = moved[1:]
        assert (moved > 1e-3).all(), (case, moved)
    # Muon's step gives the blocks' kernels other weights than AdamW's under the same settings.
    assert np.abs(updates["muon"][-1] - updates["layerwise"][-1]).max() > 1e-3


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_fit_steps_equal_tensorflows(backend_outputs, backend):
    for key in ("task_weights", "task_loss", "dense_weights", "dense_loss"):
        want = probe_output(backend_outputs, "tensorflow", f"optimizer_fit.{key}")
        got = probe_output(backend_outputs, backend, f"optimizer_fit.{key}")
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL, err_msg=key)
    start = np.concatenate([v.numpy().reshape(-1) for v in tiny_task().trainable_variables])
    assert np.abs(probe_output(backend_outputs, "tensorflow", "optimizer_fit.task_weights") - start).max() > 1e-3
