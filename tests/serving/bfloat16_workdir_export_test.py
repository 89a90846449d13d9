"""`xlnet-tf export --workdir RUN --dtype bfloat16` of every task type, from real fine-tuning work directories.

The work directory's `final/` holds the task with its preprocessor attached (what
`xlnet-tf finetune` writes); the export runs through the CLI and its strings-in
signature must agree with the float32 model of the same directory within the
documented `BFLOAT16_TOLERANCE` (probabilities; regression scores and span
null scores absolutely).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import no_question

from tests.serving.tiny_finetuning_runs import CHOICES, PAIRS, SEGMENTS, TEXTS
from xlnet_tf.cli.main import main
from xlnet_tf.formats.serving_metadata import METADATA_FILE
from xlnet_tf.models.xlnet_task import load_task_preset
from xlnet_tf.serving.export_task_model import BFLOAT16_TOLERANCE

TASKS = ["classification", "regression", "span", "token_classification", "multiple_choice", "long_documents"]
QUESTIONS = ["which house?", "which day?", "which river?", "what?"]
# One window each; not empty (serving answers an empty passage without the model).
PASSAGES = ["an awful day", "a good house", "the river", "old"]


def _softmax(logits):
    return tf.nn.softmax(tf.cast(logits, tf.float32)).numpy()


def _served_and_float32(task, serve, model):
    """`(bfloat16 export's answer, float32 model's answer)` on the same inputs, as float arrays."""
    preprocessor = model.preprocessor

    def run(x):
        return model(preprocessor(x=x), training=False)

    if task == "classification":
        got = serve(text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))["probabilities"]
        return got.numpy(), _softmax(run((tf.constant(TEXTS), tf.constant(PAIRS))))
    if task == "regression":
        return serve(text=tf.constant(TEXTS))["score"].numpy(), run(tf.constant(TEXTS)).numpy()[:, 0]
    if task == "long_documents":
        documents = [(t + " ") * 3 for t in TEXTS]  # two to three segments of 16 pieces
        got = serve(text=tf.constant(documents))["probabilities"]
        features = preprocessor(x=tf.constant(documents))
        assert features["token_ids"].shape[1] == SEGMENTS
        return got.numpy(), _softmax(model(features, training=False))
    if task == "token_classification":
        got = serve(text=tf.constant(TEXTS))["probabilities"]
        return got.numpy(), _softmax(run(tf.ragged.constant([t.split() for t in TEXTS])))
    if task == "multiple_choice":
        # Serving takes each choice as fine-tuning built it: the question, a space, the option.
        joined = [[f"{q} {c}" for c in CHOICES] for q in QUESTIONS]
        got = serve(context=tf.constant(TEXTS),
                    question=no_question(tf.constant(TEXTS)),
                    choices=tf.constant(joined))["probabilities"]
        expected = run({"context": tf.constant(TEXTS), "question": tf.constant(QUESTIONS),
                        "choices": tf.constant([CHOICES] * len(TEXTS))})
        return got.numpy(), _softmax(expected)
    # Span: passages of one window; the null score is the answer-class logit of that window.
    got = serve(context=tf.constant(PASSAGES), question=tf.constant(QUESTIONS))
    np.testing.assert_array_equal(got["num_windows"].numpy(), [1] * len(PASSAGES))
    expected = run({"context": tf.constant(PASSAGES), "question": tf.constant(QUESTIONS)})
    return got["null_score"].numpy(), np.reshape(expected["cls_logits"], [-1])


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.subprocess  # the fine-tuning runs of `finetuned_workdir`
@pytest.mark.parametrize("task", TASKS)
def test_bfloat16_export_of_a_finetuning_workdir_agrees_with_float32(task, finetuned_workdir, tmp_path, capsys):
    workdir = finetuned_workdir(task)
    output = str(tmp_path / "bf16")
    assert main(["export", "--workdir", workdir, "--output", output, "--dtype", "bfloat16"]) == 0, \
        capsys.readouterr().err
    with open(os.path.join(output, METADATA_FILE)) as f:
        assert json.load(f)["dtype"] == "bfloat16"
    loaded = tf.saved_model.load(output)
    assert {v.dtype for v in loaded.model_variables if v.dtype.is_floating} == {tf.bfloat16}
    model = load_task_preset(os.path.join(workdir, "final"))
    got, expected = _served_and_float32(task, loaded.signatures["serving_default"], model)
    assert got.shape == expected.shape
    difference = np.abs(got - expected).max()
    assert 0 < difference <= BFLOAT16_TOLERANCE, difference  # > 0: it really computes in bfloat16
