"""The pretrainer and the task models give TensorFlow's numbers on JAX and PyTorch (probes: `probes/tasks_probes.py`).

Every backend loads the presets the TensorFlow run saved: predictions agree to
1e-5, the first fine-tuning and pretraining steps' losses (dropout 0, fixed data
and optimizer) to 1e-4; with dropout, a run resumed midway ends where the
uninterrupted one does (to float rounding, 1e-6), and a tiny classifier learns its
training strings.
"""

import numpy as np
import pytest

from tests.backends.backend_harness import probe_output

OTHER_BACKENDS = ("jax", "torch")
TASK_OUTPUTS = {
    "classifier": [""],
    "token_classifier": [""],
    "multiple_choice": [""],
    "span_labeler": [".start_top_log_probs", ".start_top_index", ".end_top_log_probs", ".end_top_index",
                     ".cls_logits"],
}


def _others(backend_outputs):
    backends = [backend for backend in OTHER_BACKENDS if backend in backend_outputs]
    if not backends:
        pytest.fail("neither JAX nor PyTorch is installed: nothing to compare with TensorFlow")
    return backends


def _assert_like_tensorflow(backend_outputs, key, atol):
    expected = probe_output(backend_outputs, "tensorflow", key)
    for backend in _others(backend_outputs):
        actual = probe_output(backend_outputs, backend, key)
        assert actual.shape == expected.shape, f"{key} on {backend}: shape {actual.shape}, TF {expected.shape}"
        if np.issubdtype(expected.dtype, np.integer):
            np.testing.assert_array_equal(actual, expected, err_msg=f"{key} on {backend}")
        else:
            np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=f"{key} on {backend}")


@pytest.mark.parametrize("task", sorted(TASK_OUTPUTS))
@pytest.mark.parametrize("source", ["ids", "strings", "call"])
def test_every_task_head_predicts_like_tensorflow(backend_outputs, task, source):
    for suffix in TASK_OUTPUTS[task]:
        _assert_like_tensorflow(backend_outputs, f"tasks_predict.{task}.{source}{suffix}", atol=1e-5)


def test_predictions_from_strings_equal_those_from_ids_of_the_same_model(backend_outputs):
    # Raw text goes through the preprocessor in tf.data, ids straight to the model: one model, one result each.
    for backend in backend_outputs:
        ids = probe_output(backend_outputs, backend, "tasks_predict.classifier.ids")
        called = probe_output(backend_outputs, backend, "tasks_predict.classifier.call")
        np.testing.assert_allclose(ids, called, atol=1e-6)


@pytest.mark.parametrize("key", ["call.logits", "call.query_output", "call.sequence_output", "call.new_mems",
                                 "predict.logits", "predict.new_mems"])
def test_pretrainer_outputs_with_memory_perm_mask_and_target_mapping(backend_outputs, key):
    _assert_like_tensorflow(backend_outputs, f"tasks_pretrainer_outputs.{key}", atol=1e-5)


@pytest.mark.parametrize("key", ["classifier.losses", "multiple_choice.losses", "span_labeler.losses",
                                 "token_classifier.losses", "strings.losses", "classifier.evaluate",
                                 "multiple_choice.evaluate", "span_labeler.evaluate", "token_classifier.evaluate",
                                 "strings.evaluate"])
def test_first_fine_tuning_steps_lose_what_tensorflow_loses(backend_outputs, key):
    _assert_like_tensorflow(backend_outputs, f"tasks_finetune_losses.{key}", atol=1e-4)
    losses = probe_output(backend_outputs, "tensorflow", f"tasks_finetune_losses.{key}")
    assert np.all(np.isfinite(losses)) and np.all(np.abs(losses) < 100.0), f"{key}: {losses}"


def test_fine_tuned_from_strings_predicts_like_tensorflow(backend_outputs):
    _assert_like_tensorflow(backend_outputs, "tasks_finetune_losses.strings.predict", atol=1e-4)


@pytest.mark.parametrize("probe", ["tasks_pretrainer_losses", "tasks_pretrainer_memory_losses"])
def test_pretraining_steps_lose_what_tensorflow_loses(backend_outputs, probe):
    for key in ("losses", "accuracy", "lm_bias"):
        _assert_like_tensorflow(backend_outputs, f"{probe}.{key}", atol=1e-4)
    losses = probe_output(backend_outputs, "tensorflow", f"{probe}.losses")
    assert losses[2] < losses[0], losses  # the steps did train


def test_memory_is_carried_across_pretraining_steps(backend_outputs):
    _assert_like_tensorflow(backend_outputs, "tasks_pretrainer_memory_losses.memory", atol=1e-4)
    for backend in backend_outputs:
        memory = probe_output(backend_outputs, backend, "tasks_pretrainer_memory_losses.memory")
        assert np.abs(memory).max() > 1e-3, f"{backend}: the memory was never written"
        with_memory = probe_output(backend_outputs, backend, "tasks_pretrainer_memory_losses.losses")
        without = probe_output(backend_outputs, backend, "tasks_pretrainer_losses.losses")
        assert abs(with_memory[1] - without[1]) > 1e-4, f"{backend}: step 2 did not read step 1's memory"


@pytest.mark.parametrize("model", ["classifier", "pretrainer"])
def test_training_with_dropout_resumes_where_it_left_off(backend_outputs, model):
    for backend in backend_outputs:
        assert int(probe_output(backend_outputs, backend, f"tasks_resume.{model}.restored_step")) == 2
        # Same masks, same batches, same optimizer state: only float rounding may differ (TensorFlow's CPU
        # kernels may sum in thread order; about 1e-9 seen), far below the > 1e-4 another seed moves.
        assert float(probe_output(backend_outputs, backend, f"tasks_resume.{model}.resumed_diff")) <= 1e-6, backend
        # Dropout acts: another run seed from the same midway state ends elsewhere.
        assert float(probe_output(backend_outputs, backend, f"tasks_resume.{model}.other_seed_diff")) > 1e-4, backend


def test_a_tiny_classifier_learns_its_training_strings_on_every_backend(backend_outputs):
    for backend in backend_outputs:
        def value(key, backend=backend):
            return probe_output(backend_outputs, backend, f"tasks_strings_learn.{key}")

        assert float(value("loss_after")) < 0.6 * float(value("loss_before")), backend
        losses = value("losses")
        assert losses[-3:].mean() < 0.7 * losses[:3].mean(), (backend, losses)
        assert float(value("accuracy_after")) >= 0.875 > float(value("accuracy_before")), backend
        assert float(value("predicted_accuracy")) >= 0.875, backend
