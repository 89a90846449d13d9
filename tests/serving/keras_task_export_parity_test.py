"""An exported SavedModel answers like the Keras task on the same strings (1e-5), for every task.

Each test builds a tiny task model with its preprocessor, saves it the way
`xlnet-tf finetune` saves `final/` (`save_to_preset(..., preprocessing=preprocessing_info(task))`,
keras-hub's layout), exports the work directory with `export_task_workdir` (what
`xlnet-tf export --workdir` runs), loads the SavedModel and compares its
`serving_default` on strings with `model.predict(strings)`.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import no_question

from xlnet_tf import (XLNetClassifier, XLNetClassifierPreprocessor, XLNetMultipleChoice,
                      XLNetMultipleChoicePreprocessor, XLNetSpanLabeler, XLNetSpanLabelerPreprocessor,
                      XLNetTokenClassifier, XLNetTokenClassifierPreprocessor, XLNetTokenizer)
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.finetuning.finetuning_run import preprocessing_info
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.serving.export_task_workdir import export_task_workdir

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH = 24
CONFIG = dict(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8,
              intermediate_dim=16, dropout=0.0, attention_dropout=0.0)
TEXTS = ["A man plays a guitar on the stage tonight.", "Rain.", "",
         "the quick brown fox jumps over the lazy dog " * 4]
PAIRS = ["Someone makes music.", "Nothing at all.", "x", ""]


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer(SPIECE)


def backbone():
    # No keras.utils.set_random_seed here: it clears TensorFlow's kernel cache, which
    # destroys the SentencePiece resource of the module's tokenizer.
    return XLNetBackbone(XLNetConfig(**CONFIG))


def export(model, tmp_path, length=LENGTH, **task):
    """`final/` as `xlnet-tf finetune` writes it, then `export_task_workdir`; the loaded SavedModel."""
    workdir = tmp_path / "workdir"
    info = preprocessing_info(TaskSpec(sequence_length=length, **task))
    model.save_to_preset(str(workdir / "final"), vocabulary_file=SPIECE, preprocessing=info)
    assert json.load(open(workdir / "final" / "task.json"))["registered_name"] == (
        f"xlnet_tf>{type(model).__name__}")
    path = export_task_workdir(str(workdir), str(tmp_path / "export"))
    return tf.saved_model.load(path).signatures["serving_default"]


def test_classifier_single_text(tmp_path, tokenizer):
    model = XLNetClassifier(backbone(), num_classes=3,
                            preprocessor=XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH))
    serve = export(model, tmp_path, task_type="classification", num_classes=3,
                   label_names=["a", "b", "c"])
    expected = model.predict(TEXTS, verbose=0)
    got = serve(text=tf.constant(TEXTS))
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=1e-5, rtol=0)
    assert [n.decode() for n in got["label_name"].numpy()] == ["abc"[i] for i in expected.argmax(-1)]


def test_classifier_text_pairs(tmp_path, tokenizer):
    # A pair task: fine-tuning sees two text fields in its training file.
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"premise": "a", "hypothesis": "b", "label": 0}) + "\n")
    model = XLNetClassifier(backbone(), num_classes=2,
                            preprocessor=XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH))
    serve = export(model, tmp_path, task_type="classification", num_classes=2, train_file=str(train),
                   text_fields=["premise", "hypothesis"])
    expected = model.predict(x=(TEXTS, PAIRS), verbose=0)
    got = serve(text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=1e-5, rtol=0)


def test_span_labeler(tmp_path, tokenizer):
    # Passages that fit one window: the Keras preprocessor packs the first window only.
    contexts = ["The quick brown fox jumps over the dog.", "Short one.", "A river runs by."]
    questions = ["Who jumps?", "What?", "Where?"]
    model = XLNetSpanLabeler(backbone(), start_n_top=3, end_n_top=3,
                             preprocessor=XLNetSpanLabelerPreprocessor(
                                 tokenizer, sequence_length=64, max_query_length=8, doc_stride=8))
    serve = export(model, tmp_path, length=64, task_type="span", max_query_length=8, doc_stride=8,
                   max_answer_length=10)
    expected = model.predict({"context": contexts, "question": questions}, verbose=0)
    got = serve(context=tf.constant(contexts), question=tf.constant(questions))
    np.testing.assert_array_equal(got["num_windows"].numpy(), [1, 1, 1])
    np.testing.assert_allclose(got["null_score"].numpy(), expected["cls_logits"].reshape(-1), atol=1e-5, rtol=0)
    # The best valid (start, end) of the beam, scored as the decoder does.
    best = (expected["start_top_log_probs"][:, :, None]
            + expected["end_top_log_probs"].reshape(3, 3, 3)).max(axis=(1, 2))
    assert np.all(got["score"].numpy() <= best + 1e-5)
    # The null-score threshold a SQuAD 2.0 run tunes (preprocessing.json) decides which rows stay blank.
    null = expected["cls_logits"].reshape(-1)
    threshold = float(np.sort(null)[1])  # between the scores: one row above it, two at or below
    answered = export(
        model, tmp_path / "tuned", length=64, task_type="span", max_query_length=8, doc_stride=8,
        max_answer_length=10, version_2=True, null_score_threshold=threshold)(
        context=tf.constant(contexts), question=tf.constant(questions))
    blank = np.array([t == b"" for t in answered["answer_text"].numpy()])
    no_span = np.array([t == b"" for t in got["answer_text"].numpy()])  # blank without a threshold
    np.testing.assert_array_equal(blank, (null > threshold) | no_span)
    assert blank[np.argmax(null)]


def test_multiple_choice(tmp_path, tokenizer):
    contexts = ["The fox jumps over the dog.", "Rain falls on the river.", ""]
    choices = [["a fox", "a dog"], ["rain", "the sun"], ["x", ""]]
    model = XLNetMultipleChoice(backbone(), preprocessor=XLNetMultipleChoicePreprocessor(
        tokenizer, sequence_length=LENGTH, second_max_length=12))
    serve = export(model, tmp_path, task_type="multiple_choice", num_classes=2, max_qa_length=12)
    expected = model.predict({"context": contexts, "question": ["who", "what", "q"],
                              "choices": choices}, verbose=0)
    # Serving takes the second segment whole: the question joined to each choice, as fine-tuning does.
    joined = [[f"{q} {c}" for c in row] for q, row in zip(["who", "what", "q"], choices)]
    got = serve(context=tf.constant(contexts),
                question=no_question(tf.constant(contexts)),
                choices=tf.constant(joined))
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=1e-5, rtol=0)


def test_token_classifier(tmp_path, tokenizer):
    words = [["The", "quick", "fox"], ["Rain", "falls", "on", "the", "river", "bank"]]
    model = XLNetTokenClassifier(backbone(), num_classes=4,
                                 preprocessor=XLNetTokenClassifierPreprocessor(tokenizer, sequence_length=LENGTH))
    serve = export(model, tmp_path, task_type="token_classification", num_classes=4,
                   label_names=["O", "B", "I", "X"])
    expected = model.predict(tf.ragged.constant(words), verbose=0)
    got = serve(text=tf.constant([" ".join(w) for w in words]))
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=1e-5, rtol=0)
