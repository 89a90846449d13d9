"""`XLNetBackbone`, long documents and `RecurrenceMemory` on JAX and PyTorch give TensorFlow's numbers.

The probes (`probes/backbone_probes.py`) load one preset that the TensorFlow
run saved, so every backend runs the same model. Presets and `.keras` files
travel both ways: each backend's probe loads the files of the backends that ran
before it (JAX TensorFlow's, PyTorch both), and `test_tensorflow_loads_...`
below loads JAX's and PyTorch's in this TensorFlow process.
"""

import os

import keras
import numpy as np
import pytest

from tests.backends.backend_harness import BACKENDS, backend_available, probe_output
from tests.backends.probes import backbone_probes
from tests.harness import tiny_config

INSTALLED = [backend for backend in BACKENDS if backend_available(backend)]
OTHER_BACKENDS = [backend for backend in INSTALLED if backend != "tensorflow"]
# Float32 on CPU from one set of weights: the backends differ by rounding only.
TOLERANCE = 1e-5


def assert_same_as_tensorflow(outputs, backend, key, tolerance=TOLERANCE):
    actual = probe_output(outputs, backend, key)
    expected = probe_output(outputs, "tensorflow", key)
    assert actual.shape == expected.shape, (key, actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, atol=tolerance, rtol=0, err_msg=f"{key} on {backend}")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_memory_and_its_mask_give_tensorflow_s_outputs(backend_outputs, backend):
    for key in ("sequence_output", "new_mems", "predict_sequence_output", "predict_new_mems"):
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_memory.{key}")
    # predict is the call, batch by batch.
    np.testing.assert_allclose(probe_output(backend_outputs, backend, "backbone_memory.predict_sequence_output"),
                               probe_output(backend_outputs, backend, "backbone_memory.sequence_output"),
                               atol=1e-6, rtol=0)


def test_the_memory_mask_closes_positions(backend_outputs):
    """The probe's memory mask matters: opening row 0's 2 closed positions changes that row only."""
    masked = probe_output(backend_outputs, "tensorflow", "backbone_memory.sequence_output")
    opened = probe_output(backend_outputs, "tensorflow", "backbone_memory.open_sequence_output")
    assert np.abs(masked[0] - opened[0]).max() > 1e-3
    np.testing.assert_array_equal(masked[1], opened[1])


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_two_streams_give_tensorflow_s_outputs(backend_outputs, backend):
    for key in ("sequence_output", "query_output", "new_mems", "hidden_states", "query_hidden_states"):
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_two_stream.{key}")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_a_mixed_padding_batch_gives_tensorflow_s_outputs(backend_outputs, backend):
    for key in ("sequence_output", "new_mems", "cls_output"):
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_mixed_padding.{key}")
    # output_positions reads the last layer at <cls> only: the full output's column there.
    np.testing.assert_allclose(probe_output(backend_outputs, backend, "backbone_mixed_padding.cls_output"),
                               probe_output(backend_outputs, backend, "backbone_mixed_padding.sequence_output")[:, 6:],
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_a_long_document_gives_tensorflow_s_outputs_and_gradients(backend_outputs, backend):
    for key in ("last_segment", "last_cls", "reuse_last_segment", "loss", "embedding_gradient"):
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_long_document.{key}")
    if backend == "jax":  # a jitted call reads the leading padding segment too: closed, so the same output
        np.testing.assert_allclose(
            probe_output(backend_outputs, "jax", "backbone_long_document.compiled_last_segment"),
            probe_output(backend_outputs, "tensorflow", "backbone_long_document.last_segment"), atol=TOLERANCE, rtol=0)


def test_the_long_document_reads_the_earlier_segments(backend_outputs):
    """The memory carries the earlier segments: the gradient reaches only the last segment's tokens."""
    features = backbone_probes.long_documents(tiny_config())
    gradient = probe_output(backend_outputs, "tensorflow", "backbone_long_document.embedding_gradient")
    last_ids = set(features["token_ids"][:, -1].ravel().tolist())
    earlier_only = set(features["token_ids"][:, :-1].ravel().tolist()) - last_ids
    assert earlier_only, "the probe's documents need ids that only earlier segments hold"
    assert all(np.abs(gradient[i]).max() == 0.0 for i in earlier_only)  # stopped at the memory
    assert all(np.abs(gradient[i]).max() > 0.0 for i in last_ids)
    with_memory = probe_output(backend_outputs, "tensorflow", "backbone_long_document.last_segment")
    reuse = probe_output(backend_outputs, "tensorflow", "backbone_long_document.reuse_last_segment")
    assert np.abs(with_memory - reuse).max() > 1e-3  # memory_length / reuse_length change what is read


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_gradients_w_r_t_the_embedding_equal_tensorflow_s(backend_outputs, backend):
    keys = [key.split(".", 1)[1] for key in backend_outputs["tensorflow"] if key.startswith("backbone_gradients.")]
    assert len(keys) == 8, keys
    for key in keys:
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_gradients.{key}")


@pytest.mark.parametrize("backend", INSTALLED)
def test_rematerialized_gradients_equal_plain_ones(backend_outputs, backend):
    for key in [k.split(".", 1)[1] for k in backend_outputs[backend] if k.startswith("backbone_gradients.plain_")]:
        plain = probe_output(backend_outputs, backend, f"backbone_gradients.{key}")
        remat = probe_output(backend_outputs, backend, f"backbone_gradients.{key.replace('plain_', 'remat_', 1)}")
        assert np.abs(plain).max() > 0.0, key
        np.testing.assert_allclose(remat, plain, atol=1e-6, rtol=1e-5, err_msg=f"{key} on {backend}")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_presets_and_keras_files_of_earlier_backends_load(backend_outputs, backend):
    reference = probe_output(backend_outputs, "tensorflow", "backbone_portability.own")
    np.testing.assert_allclose(probe_output(backend_outputs, backend, "backbone_portability.own"), reference,
                               atol=TOLERANCE, rtol=0)
    earlier = INSTALLED[:INSTALLED.index(backend)]
    for source in earlier:
        for kind in ("preset", "keras"):
            key = f"backbone_portability.from_{source}_{kind}"
            np.testing.assert_allclose(probe_output(backend_outputs, backend, key), reference, atol=TOLERANCE,
                                       rtol=0, err_msg=key)


@pytest.mark.parametrize("source", OTHER_BACKENDS)
def test_tensorflow_loads_the_presets_and_keras_files_of_jax_and_torch(backend_outputs, source):
    import xlnet_tf  # noqa: F401 - registers the Keras classes for `load_model`

    directory = str(probe_output(backend_outputs, source, "backbone_portability.saved_dir"))
    reference = probe_output(backend_outputs, "tensorflow", "backbone_portability.own")
    inputs = backbone_probes.memory_inputs(tiny_config(memory_length=backbone_probes.MEMORY_LENGTH))
    from_preset = backbone_probes.XLNetBackbone.from_preset(os.path.join(directory, "preset"))
    from_keras = keras.saving.load_model(os.path.join(directory, "backbone.keras"))
    for model in (from_preset, from_keras):
        np.testing.assert_allclose(model(inputs)["query_output"].numpy(), reference, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("backend", INSTALLED)
def test_recurrence_memory_reads_writes_resets_and_round_trips(backend_outputs, backend):
    def output(key):
        return probe_output(backend_outputs, backend, f"backbone_recurrence_memory.{key}")

    shape = (2, 2, 3, 8)
    second = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    expected_reads = np.stack([np.zeros(shape), np.full(shape, 1.5), second, np.zeros(shape)])
    np.testing.assert_array_equal(output("reads"), expected_reads)  # zeros at steps 0 and 3 (reset_every_steps 3)
    np.testing.assert_array_equal(output("values"), np.full((1,) + shape, 1.5))  # the buffer itself
    np.testing.assert_array_equal(output("after_reset"), np.zeros((1,) + shape))
    assert int(output("step_after_reset")) == 7
    # Its own file and those of the backends before it (TensorFlow's replica layout is one replica here).
    for source in INSTALLED[:INSTALLED.index(backend) + 1]:
        assert int(output(f"restored_{source}_step")) == 3
        np.testing.assert_array_equal(output(f"restored_{source}"), np.full((1,) + shape, 1.5))
    assert str(output("mismatch_message")) == ("<dir>/memory.npz: memory of shape (2, 2, 3, 8) (per-replica batch, "
                                               "layers, memory_length, hidden), this run needs (2, 2, 4, 8).")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_fit_carries_the_memory_from_step_to_step_as_tensorflow(backend_outputs, backend):
    for key in ("memory", "loss"):
        assert_same_as_tensorflow(backend_outputs, backend, f"backbone_memory_through_fit.{key}", tolerance=1e-5)
    assert int(probe_output(backend_outputs, backend, "backbone_memory_through_fit.step")) == 2
    assert np.abs(probe_output(backend_outputs, backend, "backbone_memory_through_fit.memory")).max() > 0.0


@pytest.mark.parametrize("backend", INSTALLED)
def test_a_memory_reset_to_zero_changes_the_next_step_s_loss(backend_outputs, backend):
    """`fit`'s losses are the running mean of its steps; `train_on_batch` with a reset in between gives step 1
    alike and another step 2: the carried memory is what the second step read."""
    carried = probe_output(backend_outputs, backend, "backbone_memory_through_fit.loss")
    reset = probe_output(backend_outputs, backend, "backbone_memory_through_fit.reset_losses")
    # The second step of the carried run, from fit's running mean of two steps.
    second_step = 2 * float(carried[-1]) - float(reset[0])
    # Small (about 5e-5: a tiny random model reads little from its memory) but far above float32 rounding (1e-7).
    assert abs(second_step - float(reset[1])) > 1e-5, (carried, reset)
