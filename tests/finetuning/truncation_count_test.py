"""`evaluate` reports `examples` and `truncated_examples` for every layout (a stub model: no training)."""

import json

import pytest
import tensorflow as tf

from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

MEDIUM = "the old mill by a quiet river"  # 15 pieces


class _Constant:
    """Logits that only depend on the batch shape (the last axis: `classes` scores)."""

    def __init__(self, classes, per_token=False):
        self.classes, self.per_token = classes, per_token
        self.shapes = []

    def __call__(self, features, training=False):
        ids = features["token_ids"]
        self.shapes.append(tuple(ids.shape[1:]))
        if self.per_token:
            return tf.zeros(tf.concat([tf.shape(ids), [self.classes]], 0))  # [B, L, C]
        return tf.zeros(tf.stack([tf.shape(ids)[0], self.classes]))  # [B, classes]


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer("tests/testdata/tiny_spiece.model")


def _task(path, *overrides):
    return load_finetune_config([], ["training.global_batch_size=4", f"task.train_file={path}",
                                     f"task.eval_file={path}", *overrides]).task


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_classification_counts_documents_cut_at_max_segments_times_length(tokenizer, tmp_path):
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(
        ["a quiet river", MEDIUM, " ".join([MEDIUM] * 2), "", " ".join([MEDIUM] * 3)])]
    path = _write(tmp_path / "d.jsonl", rows)
    model = _Constant(2)
    long = evaluate(model, _task(path, "task.num_classes=2", "task.sequence_length=8", "task.max_segments=3"),
                    tokenizer, 2, collapse_warning=False)
    assert (long["examples"], long["truncated_examples"]) == (5, 2)  # 30 and 45 pieces > 22
    assert set(model.shapes) == {(3, 8)}
    single = evaluate(_Constant(2), _task(path, "task.num_classes=2", "task.sequence_length=8"),
                      tokenizer, 2, collapse_warning=False)
    assert (single["examples"], single["truncated_examples"]) == (5, 3)  # 15 pieces > 6 too


def test_multiple_choice_counts_a_question_once(tokenizer, tmp_path):
    rows = [{"context": "a quiet river", "question": "where?", "options": ["river", "hill"], "label": 0},
            {"context": " ".join([MEDIUM] * 3), "question": "where?", "options": ["river", "hill"], "label": 1}]
    path = _write(tmp_path / "race.jsonl", rows)
    task = _task(path, "task.task_type=multiple_choice", "task.sequence_length=8", "task.max_segments=3",
                 "task.max_qa_length=16")
    model = _Constant(2)
    result = evaluate(model, task, tokenizer, 2, collapse_warning=False)
    assert (result["examples"], result["truncated_examples"]) == (2, 1)  # both choices of the second cut
    assert model.shapes == [(2, 3, 8)]
    # The question + option over max_qa_length is cut too, and counted.
    short_qa = _task(path, "task.task_type=multiple_choice", "task.sequence_length=8", "task.max_segments=3",
                     "task.max_qa_length=1")
    assert evaluate(_Constant(2), short_qa, tokenizer, 2, collapse_warning=False)["truncated_examples"] == 2


def test_token_classification_counts_sentences(tokenizer, tmp_path):
    rows = [{"tokens": ["a", "quiet", "river"], "tags": [0, 1, 0]},
            {"tokens": MEDIUM.split() * 2, "tags": [0] * 14}]
    path = _write(tmp_path / "ner.jsonl", rows)
    task = _task(path, "task.task_type=token_classification", "task.num_classes=2", "task.sequence_length=12")
    result = evaluate(_Constant(2, per_token=True), task, tokenizer, 2, collapse_warning=False)
    assert result["truncated_examples"] == 1  # 30 pieces > 10; `examples` stays the labelled tokens
    assert 3 < result["examples"] < 3 + 14  # the cut sentence keeps only its first words' labels


def test_records_without_the_flag_give_an_unknown_count(tokenizer, tmp_path):
    from tests.data.finetuning_test import _write_records

    _write_records(tmp_path / "old", "classification", [([5, 5, 10, 11, 12, 13, 4, 3], i % 2) for i in range(4)])
    manifest = json.loads((tmp_path / "old" / "manifest.json").read_text())
    manifest["splits"]["validation"] = manifest["splits"]["train"]
    (tmp_path / "old" / "manifest.json").write_text(json.dumps(manifest))
    task = load_finetune_config([], ["training.global_batch_size=4", f"task.records_dir={tmp_path / 'old'}",
                                     "task.sequence_length=8", "task.num_classes=2"]).task
    result = evaluate(_Constant(2), task, tokenizer, 2, collapse_warning=False)
    assert result["examples"] == 4 and result["truncated_examples"] is None
