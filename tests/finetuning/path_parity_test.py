"""One example, one set of ids: every path that packs fine-tuning input agrees, for every task type.

The same raw examples go through
- the tf.data reader of `xlnet-tf finetune` (`finetuning_dataset` on a local JSONL file),
- the keras-hub preprocessor of the task model (what `fit` / `predict` on strings use),
- the Beam job's records (`xlnet-tf prepare-finetuning`, read back with `finetuning_record_dataset`),
- the exported SavedModel's text signature (`serving_default`);
the ids must be identical, and the SavedModel's outputs equal the model's on the reader's ids (1e-5).

Cases: single text with an empty text, pairs (regression), multiple choice with a cloze question
(`_`) and a plain one, SQuAD windows, word lists with int32 and int64 row splits, long documents
(`max_segments` 2 with recurrence memory), and a malformed line (the reader names file and line;
the Beam job skips it, counts it, and its manifest accounts for every line).

Tiny models, one export and one Beam job per task type, all built once per module.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config
from tests.serving.conftest import SPIECE, export_task
from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.data.finetuning import finetuning_dataset
from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset
from xlnet_tf.finetuning.finetuning_config import resolve_task
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.finetuning.finetuning_run import preprocessing_info
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

# One Beam job and one export per task type: about 1.5 minutes on 2 shared cores.
pytestmark = pytest.mark.slow

L = 16
KEYS = ("token_ids", "segment_ids", "padding_mask")
CONFIG = {"vocabulary_size": 200, "num_layers": 2, "num_heads": 2, "head_dim": 4, "hidden_dim": 8,
          "intermediate_dim": 16, "initializer_range": 0.3}

TEXTS = [{"text": "The quick brown fox jumps over the lazy dog near the river.", "label": 1},
         {"text": "", "label": 0},  # an empty text is an example: `<sep> <cls>` on every path
         {"text": "Short one.", "label": 1}]
PAIRS = [{"text": "A fine film.", "text_pair": "A weak ending.", "label": 0.5},
         {"text": "The river bank in the early morning while birds sing.", "text_pair": "", "label": 2.0},
         {"text": "Hello world.", "text_pair": "Small test of serving with a long pair text here.", "label": 4.25}]
CHOICES = [{"context": "The sky is blue today and the sun shines.", "question": "The sky is _ today.",
            "options": ["blue", "red", "green"], "label": 0},
           {"context": "The fox jumps over the dog.", "question": "Who jumps?",
            "options": ["the fox", "the dog", "nobody at all"], "label": 0},
           {"context": "", "question": "", "options": ["a", "", "b c"], "label": 2}]
WORDS = [{"tokens": ["John", "lives", "in", "Berlin", "."], "tags": [1, 0, 0, 2, 0]},
         {"tokens": ["Hello"], "tags": [0]},
         {"tokens": ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
          "tags": [0, 0, 0, 1, 0, 0, 0, 0, 1, 0]}]
# Longer than one segment, shorter than two: packed whole on every path (serving never truncates).
DOCUMENTS = [{"text": "The quick brown fox jumps over the lazy dog.", "label": 1},  # 27 pieces
             {"text": "Short one.", "label": 0}]
CONTEXT = "The quick brown fox jumps over the lazy dog near the river bank in the early morning."
SQUAD = {"data": [{"paragraphs": [{"context": CONTEXT, "qas": [
    {"id": "q1", "question": "Who jumps?", "answers": [{"text": "brown fox", "answer_start": 10}]},
    {"id": "q2", "question": "Why?", "answers": [], "is_impossible": True}]}]}]}


def _write_jsonl(path, rows, bad_line=None):
    lines = [json.dumps(row) for row in rows]
    if bad_line is not None:
        lines.insert(bad_line, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _np(features):
    return {k: np.asarray(features[k]) for k in KEYS}


def _assert_same_ids(got, expected, what):
    for key in KEYS:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected[key]), err_msg=f"{what}: {key}")


def _reader(task, n):
    features, labels = next(iter(finetuning_dataset(task, _tokenizer(), "train", n, training=False)))
    return _np(features), labels


def _records(directory):
    rows = sorted(finetuning_record_dataset(directory, "train", with_example_id=True),
                  key=lambda r: r[0]["example_id"].numpy())
    return {k: np.stack([f[k].numpy() for f, _ in rows]) for k in KEYS}, [y for _, y in rows]


def _beam(tmp, task_type, path, *extra):
    out = str(tmp / "records")
    manifest = prepare_finetuning.run(["--task-type", task_type, "--input", f"train={path}", "--vocab", SPIECE,
                                       "--sequence-length", str(L), "--num-shards", "1", "--output-dir", out,
                                       "--runner=FnApiRunner", *extra])
    return manifest, out


_TOKENIZER = []


def _tokenizer():
    if not _TOKENIZER:
        _TOKENIZER.append(XLNetTokenizer(SPIECE))
    return _TOKENIZER[0]


def _case(tmp, task_type, rows, model, beam_args=(), **task_fields):
    """Reader ids, Beam ids, the model and its export for one task type (the shared fixture body)."""
    path = _write_jsonl(tmp / "train.jsonl", rows)
    task = resolve_task(TaskSpec(task_type=task_type, train_file=path, sequence_length=L, **task_fields))
    reader, labels = _reader(task, len(rows))
    manifest, records_dir = _beam(tmp, task_type, path, *beam_args)
    records, record_labels = _records(records_dir)
    _, _, loaded = export_task(tmp, model, preprocessing_info(task))
    return {"task": task, "reader": reader, "labels": labels, "records": records, "record_labels": record_labels,
            "manifest": manifest, "model": model, "serving": loaded.signatures["serving_default"]}


def _backbone(**overrides):
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    return XLNetBackbone(tiny_config(**{**CONFIG, **overrides}))


@pytest.fixture(scope="module")
def single_text(tmp_path_factory):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    return _case(tmp_path_factory.mktemp("single"), "classification", TEXTS,
                 XLNetClassifier(_backbone(), num_classes=2, dropout=0.0), ["--text-fields", "text"],
                 num_classes=2, text_fields=["text"])


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    return _case(tmp_path_factory.mktemp("pairs"), "regression", PAIRS,
                 XLNetClassifier(_backbone(), num_classes=1, dropout=0.0))


@pytest.fixture(scope="module")
def choices(tmp_path_factory):
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice

    return _case(tmp_path_factory.mktemp("choices"), "multiple_choice", CHOICES,
                 XLNetMultipleChoice(_backbone(), dropout=0.0), ["--max-qa-length", "8"], max_qa_length=8,
                 num_classes=3)


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

    # With its preprocessor: `predict` on word lists.
    model = XLNetTokenClassifier(_backbone(), num_classes=3, dropout=0.0,
                                 preprocessor=XLNetTokenClassifier.preprocessor_cls(_tokenizer(), sequence_length=L))
    return _case(tmp_path_factory.mktemp("words"), "token_classification", WORDS, model, ["--label-names", "O,PER,LOC"],
                 num_classes=3, label_names=["O", "PER", "LOC"])


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    # Recurrence memory over the whole document: the last segment sees the first.
    return _case(tmp_path_factory.mktemp("documents"), "classification", DOCUMENTS,
                 XLNetClassifier(_backbone(memory_length=L, reuse_length=0), num_classes=2, dropout=0.0),
                 ["--text-fields", "text", "--max-segments", "2"], num_classes=2, text_fields=["text"],
                 max_segments=2)


def _preprocessor(case, **kwargs):
    cls = type(case["model"]).preprocessor_cls
    return cls(_tokenizer(), sequence_length=L, **kwargs)


def _served_matches_model(case, outputs, key="logits", atol=1e-5):
    expected = case["model"](case["reader"], training=False)
    expected = expected[key] if isinstance(expected, dict) else expected
    got = outputs["score" if case["task"].num_classes == 1 else key].numpy()
    np.testing.assert_allclose(got, np.reshape(expected, got.shape), atol=atol, rtol=0)


# --------------------------------------------------------------------------- single text (+ empty text)


def test_single_text_paths_agree(single_text):
    reader = single_text["reader"]
    # The empty text is packed, not skipped: `<sep> <cls>` at the end of an all-padding row.
    assert reader["token_ids"][1, -2:].tolist() == [4, 3] and reader["padding_mask"][1].sum() == 2
    texts = [row["text"] for row in TEXTS]
    _assert_same_ids(_preprocessor(single_text)(texts), reader, "preprocessor")
    _assert_same_ids(single_text["records"], reader, "Beam records")
    assert single_text["manifest"]["examples"]["written"] == len(TEXTS)
    _served_matches_model(single_text, single_text["serving"](text=tf.constant(texts)))


# --------------------------------------------------------------------------- pairs (regression)


def test_pair_paths_agree(pairs):
    reader = pairs["reader"]
    a, b = [row["text"] for row in PAIRS], [row["text_pair"] for row in PAIRS]
    _assert_same_ids(_preprocessor(pairs)(x=(a, b)), reader, "preprocessor")
    _assert_same_ids(pairs["records"], reader, "Beam records")
    np.testing.assert_allclose([float(y) for y in pairs["record_labels"]], [row["label"] for row in PAIRS])
    _served_matches_model(pairs, pairs["serving"](text=tf.constant(a), text_pair=tf.constant(b)))


# --------------------------------------------------------------------------- multiple choice


def test_multiple_choice_paths_agree(choices):
    reader = choices["reader"]
    assert reader["token_ids"].shape == (len(CHOICES), 3, L)
    raw = {"context": [row["context"] for row in CHOICES], "question": [row["question"] for row in CHOICES],
           "choices": [row["options"] for row in CHOICES]}
    _assert_same_ids(_preprocessor(choices, second_max_length=8)(raw), reader, "preprocessor")
    _assert_same_ids(choices["records"], reader, "Beam records")
    assert [int(y) for y in choices["record_labels"]] == [row["label"] for row in CHOICES]
    served = choices["serving"](context=tf.constant(raw["context"]), question=tf.constant(raw["question"]),
                                choices=tf.constant(raw["choices"]))
    _served_matches_model(choices, served)


def test_cloze_question_gets_the_option_in_its_blank(choices):
    # The original RACE code: "The sky is _ today." + "blue" -> "The sky is blue today."
    # `keep_second`: the question + option keeps its last 8 pieces (`--max-qa-length 8`).
    tokenizer = _tokenizer()
    for question, (example, choice) in (("The sky is blue today.", (0, 0)), ("Who jumps? the fox", (1, 0))):
        expected = list(tokenizer.tokenize(question))[-8:]
        row = choices["reader"]["token_ids"][example, choice]
        assert row[-2 - len(expected):-2].tolist() == expected  # before `<sep> <cls>`
        assert row[-3 - len(expected)] == 4  # the context's `<sep>`


# --------------------------------------------------------------------------- token classification


@pytest.mark.parametrize("splits", [tf.int32, tf.int64])
def test_word_list_paths_agree(words, splits):
    reader, labels = words["reader"], words["labels"].numpy()
    tokens = tf.ragged.constant([row["tokens"] for row in WORDS], row_splits_dtype=splits)
    tags = tf.ragged.constant([row["tags"] for row in WORDS], row_splits_dtype=splits)
    x, y = _preprocessor(words)(tokens, tags)  # a direct eager call
    _assert_same_ids(x, reader, f"preprocessor ({splits.name} row splits)")
    np.testing.assert_array_equal(y.numpy(), labels)
    # `predict` on word lists goes through the same preprocessor.
    model = words["model"]
    predicted = model.predict(tokens, verbose=0, batch_size=len(WORDS))
    np.testing.assert_allclose(predicted, model(reader, training=False).numpy(), atol=1e-5, rtol=0)


def test_word_list_records_and_serving_agree(words):
    _assert_same_ids(words["records"], words["reader"], "Beam records")
    np.testing.assert_array_equal(np.stack([y.numpy() for y in words["record_labels"]]), words["labels"].numpy())
    # Served text is split on whitespace into the words of training.
    served = words["serving"](text=tf.constant([" ".join(row["tokens"]) for row in WORDS]))
    _served_matches_model(words, served)


# --------------------------------------------------------------------------- long documents


def test_long_document_paths_agree(documents):
    reader = documents["reader"]
    assert reader["token_ids"].shape == (len(DOCUMENTS), 2, L)
    texts = [row["text"] for row in DOCUMENTS]
    _assert_same_ids(_preprocessor(documents, max_segments=2)(texts), reader, "preprocessor")
    _assert_same_ids(documents["records"], reader, "Beam records")
    _served_matches_model(documents, documents["serving"](text=tf.constant(texts)))


# --------------------------------------------------------------------------- SQuAD windows


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler

    tmp = tmp_path_factory.mktemp("squad")
    (tmp / "train.json").write_text(json.dumps(SQUAD))
    task = resolve_task(TaskSpec(task_type="span", train_file=str(tmp / "train.json"), sequence_length=24,
                                    max_query_length=6, doc_stride=6))
    windows = list(finetuning_dataset(task, _tokenizer(), "train", 64, training=False))
    (features, labels), = windows
    out = str(tmp / "records")
    prepare_finetuning.run(["--task-type", "span", "--input", f"train={tmp / 'train.json'}", "--vocab", SPIECE,
                            "--sequence-length", "24", "--max-query-length", "6", "--doc-stride", "6",
                            "--num-shards", "1", "--output-dir", out, "--runner=FnApiRunner"])
    model = XLNetSpanLabeler(_backbone(), dropout=0.0)
    _, _, loaded = export_task(tmp, model, preprocessing_info(task))
    return {"task": task, "features": features, "labels": labels, "records": out, "model": model,
            "loaded": loaded}


def test_squad_windows_agree(squad):
    features = squad["features"]
    assert features["token_ids"].shape[0] > 2  # several windows per question
    rows = sorted(finetuning_record_dataset(squad["records"], "train", with_example_id=True),
                  key=lambda r: (r[0]["example_id"].numpy(), int(r[0]["window_index"])))
    records = {k: np.stack([f[k].numpy() for f, _ in rows]) for k in KEYS}
    _assert_same_ids(records, features, "Beam records")
    np.testing.assert_array_equal([int(y["start_position"]) for _, y in rows], squad["labels"]["start_logits"])
    # The span labeler's preprocessor gives the first window of each question.
    from xlnet_tf.preprocessing.xlnet_span_labeler_preprocessor import XLNetSpanLabelerPreprocessor

    pre = XLNetSpanLabelerPreprocessor(_tokenizer(), sequence_length=24, max_query_length=6, doc_stride=6)
    first = pre({"context": [CONTEXT], "question": ["Who jumps?"]})
    _assert_same_ids({k: first[k][0] for k in KEYS}, {k: features[k][0] for k in KEYS}, "preprocessor")
    # The exported model on the reader's windows equals the in-memory model.
    ids = {k: tf.constant(features[k]) for k in KEYS}
    served = squad["loaded"].signatures["serve_token_ids"](**ids)
    expected = squad["model"]({**ids, "answer_mask": features["answer_mask"]}, training=False)
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(served[key].numpy(), np.asarray(expected[key]), atol=1e-5, rtol=0)
    answer = squad["loaded"].signatures["serving_default"](context=tf.constant([CONTEXT]),
                                                         question=tf.constant(["Who jumps?"]))
    text = answer["answer_text"].numpy()[0].decode()
    assert text in CONTEXT


# --------------------------------------------------------------------------- a malformed line


def test_malformed_line_is_named_by_the_reader_and_counted_by_the_job(tmp_path):
    path = _write_jsonl(tmp_path / "train.jsonl", TEXTS, bad_line=2)
    task = resolve_task(TaskSpec(task_type="classification", train_file=path, sequence_length=L,
                                    num_classes=2, text_fields=["text"]))
    with pytest.raises(ValueError, match=rf"{tmp_path / 'train.jsonl'}:3: not valid JSON"):
        _reader(task, 4)
    manifest, out = _beam(tmp_path, "classification", path, "--text-fields", "text")
    assert manifest["examples"]["read"] == len(TEXTS) + 1
    assert manifest["examples"]["written"] == len(TEXTS)
    assert manifest["examples"]["skipped"]["undecodable"] == 1
    # The good lines keep their position in the file.
    ids = sorted(f["example_id"].numpy().decode() for f, _ in
                 finetuning_record_dataset(out, "train", with_example_id=True))
    assert ids == ["train-000000000", "train-000000001", "train-000000003"]
    with pytest.raises(Exception, match=r"train\.jsonl:3: undecodable"):
        prepare_finetuning.run(["--task-type", "classification", "--input", f"train={path}", "--vocab", SPIECE,
                                "--sequence-length", str(L), "--output-dir", str(tmp_path / "strict"),
                                "--text-fields", "text", "--strict", "--runner=FnApiRunner"])


def test_options_are_looked_up_once():
    # The Beam job reads every task type the table knows.
    from xlnet_tf.cli.prepare_finetuning import _parser

    choices = next(a.choices for a in _parser()._actions if "--task-type" in a.option_strings)
    assert set(choices) >= {"classification", "regression", "multiple_choice", "token_classification", "span"}
    assert os.path.exists(SPIECE)
