"""xlnet_tf.layers on JAX and PyTorch: the same outputs and gradients as TensorFlow, seeded dropout per backend.

The probes are in `tests/backends/probes/layers_probes.py`. Forward outputs
and gradients (inputs and every weight) of RelativeAttention and XLNetBlock
must agree with TensorFlow's within 1e-5; dropout masks come from each
backend's own generator, so they are checked on each backend alone: the same
seed draws the same mask (also under `jax.jit`), another step or site
another mask, at the layer's rate.
"""

import numpy as np
import pytest

from tests.backends.backend_harness import probe_output

OTHER_BACKENDS = ("jax", "torch")
ALL_BACKENDS = ("tensorflow",) + OTHER_BACKENDS


def _installed(backend_outputs, backend):
    if backend not in backend_outputs:
        pytest.skip(f"{backend} is not installed")


def _keys(backend_outputs, probe):
    """The output keys of `probe` in TensorFlow's run; the probe's own error if it failed there."""
    keys = sorted(key for key in backend_outputs["tensorflow"] if key.startswith(f"{probe}."))
    if not keys:
        probe_output(backend_outputs, "tensorflow", f"{probe}.content")  # raises, with the traceback
    return keys


def _assert_matches_tensorflow(backend_outputs, backend, probe, tolerance=1e-5):
    for key in _keys(backend_outputs, probe):
        expected = probe_output(backend_outputs, "tensorflow", key)
        actual = probe_output(backend_outputs, backend, key)
        assert actual.shape == expected.shape, f"{key} on {backend}: shape {actual.shape} != {expected.shape}"
        if expected.dtype == bool:
            np.testing.assert_array_equal(actual, expected, err_msg=f"{key} on {backend}")
        else:
            np.testing.assert_allclose(actual, expected, atol=tolerance, rtol=tolerance,
                                       err_msg=f"{key} on {backend}")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
@pytest.mark.parametrize("probe", ["layers_attention", "layers_block"])
def test_two_stream_outputs_and_gradients_match_tensorflow(backend_outputs, backend, probe):
    _installed(backend_outputs, backend)
    _assert_matches_tensorflow(backend_outputs, backend, probe)
    keys = _keys(backend_outputs, probe)
    for layout in ("stacked", "apart"):
        gradients = [key for key in keys if key.startswith(f"{probe}.{layout}_grad_")]
        # Three inputs and every kernel, bias and layer-norm weight of the layer.
        assert len(gradients) >= 3 + (6 if probe == "layers_attention" else 12), gradients
        for key in gradients:
            assert np.any(probe_output(backend_outputs, backend, key) != 0), f"{key} is all zero on {backend}"
    # Stacking the streams changes no number.
    for name in ("content", "query"):
        np.testing.assert_allclose(probe_output(backend_outputs, backend, f"{probe}.stacked_{name}"),
                                   probe_output(backend_outputs, backend, f"{probe}.apart_{name}"), atol=1e-6)


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
@pytest.mark.parametrize("probe", ["layers_components", "layers_dropped_attention"])
def test_masks_encodings_and_dropped_attention_match_tensorflow(backend_outputs, backend, probe):
    _installed(backend_outputs, backend)
    _assert_matches_tensorflow(backend_outputs, backend, probe)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_seeded_dropout_masks(backend_outputs, backend):
    _installed(backend_outputs, backend)

    def output(key):
        return probe_output(backend_outputs, backend, f"layers_dropout.{key}")

    mask = output("same_a")
    np.testing.assert_array_equal(output("same_b"), mask)
    assert abs(mask.mean() - 0.7) < 0.02, mask.mean()
    for other in ("other_step", "other_site", "other_run"):
        # Independent masks at keep rate 0.7 disagree on 2 * 0.7 * 0.3 = 42% of the units.
        assert abs(np.mean(output(other) != mask) - 0.42) < 0.03, other
    np.testing.assert_allclose(np.unique(output("scaled")), [0.0, 1.0 / 0.7], rtol=1e-6)
    np.testing.assert_array_equal(output("bits_a"), output("bits_b"))
    assert np.mean(output("bits_a") == output("bits_folded")) < 0.01
    assert output("bits_a").min() >= 0 and output("bits_a").max() < 2 ** 32
    np.testing.assert_array_equal(output("stacked"), output("stacked_alone"))
    if backend == "jax":
        np.testing.assert_array_equal(output("jit_step_3"), mask)
        assert abs(np.mean(output("jit_step_4") != mask) - 0.42) < 0.03


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_traced_step_sets_the_step_of_the_dropout_seed(backend_outputs, backend):
    _installed(backend_outputs, backend)

    def output(key):
        return probe_output(backend_outputs, backend, f"layers_traced_step.{key}")

    np.testing.assert_array_equal(output("counter"), output("counter_expected"))
    np.testing.assert_array_equal(output("traced"), output("traced_expected"))
    assert not np.array_equal(output("traced"), output("counter"))
    assert not np.array_equal(output("inner"), output("traced"))
    np.testing.assert_array_equal(output("after_inner"), output("traced"))
    assert bool(output("not_training_is_none")) and bool(output("without_optimizer_is_none"))
    assert int(output("counter_value")) == 2
    if backend == "jax":
        # Under jit the traced step, not the constant counter, picks the mask.
        np.testing.assert_array_equal(output("jit_traced_5"), output("eager_traced_5"))
        assert np.mean(output("jit_traced_5") != output("jit_traced_6")) > 0.3


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_block_seeded_training_is_repeatable(backend_outputs, backend):
    _installed(backend_outputs, backend)

    def output(key):
        return probe_output(backend_outputs, backend, f"layers_block_dropout.{key}")

    for name in ("content", "query"):
        np.testing.assert_array_equal(output(f"{name}_again"), output(name))
        assert np.abs(output(f"{name}_other") - output(name)).max() > 0.1
    assert np.abs(output("content_inference") - output("content")).max() > 0.1


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_fit_draws_each_steps_seed(backend_outputs, backend):
    _installed(backend_outputs, backend)
    seeds = probe_output(backend_outputs, backend, "layers_fit_seeds.seeds")
    expected = probe_output(backend_outputs, backend, "layers_fit_seeds.expected")
    np.testing.assert_array_equal(seeds, expected)
    assert len({tuple(seed) for seed in seeds.tolist()}) == 3
    if backend == "jax":
        error = str(probe_output(backend_outputs, backend, "layers_fit_seeds.untraced_error"))
        assert "traced_step" in error and "iteration" in error, error
