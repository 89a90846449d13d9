"""`xlnet-tf predict` on exported SavedModels."""

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import LABELS, PASSAGES, QUESTIONS
from xlnet_tf.cli.predict import main


def _lines(capsys):
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_predict_pair_classifier_matches_signature(real_classifier_export, capsys):
    _, path, loaded = real_classifier_export
    texts, pairs = ["A man plays a guitar.", "Rain falls."], ["Someone makes music.", "It is dry."]
    argv = ["--model", path, texts[0], texts[1], "--pair", pairs[0], "--pair", pairs[1], "--top-k", "2"]
    assert main(argv) == 0
    records = _lines(capsys)
    expected = loaded.signatures["serving_default"](text=tf.constant(texts), text_pair=tf.constant(pairs))
    assert [r["text"] for r in records] == texts and [r["text_pair"] for r in records] == pairs
    np.testing.assert_allclose([r["probabilities"] for r in records], expected["probabilities"].numpy(), atol=1e-6)
    assert [r["label_name"] for r in records] == [LABELS[i] for i in expected["label"].numpy()]
    assert all(len(r["top_k"]) == 2 and r["top_k"][0]["label"] == r["label"] for r in records)


def test_predict_jsonl_to_file_in_batches(real_classifier_export, tmp_path, capsys):
    _, path, loaded = real_classifier_export
    rows = [{"text": f"sentence number {i}", "text_pair": "a pair"} for i in range(5)]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    out = tmp_path / "out.jsonl"
    command = ["--model", path, "--jsonl", str(tmp_path / "in.jsonl"), "--output", str(out), "--batch-size", "2"]
    assert main(command) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    expected = loaded.signatures["serving_default"](
        text=tf.constant([r["text"] for r in rows]), text_pair=tf.constant(["a pair"] * 5))
    np.testing.assert_allclose([r["probabilities"] for r in records], expected["probabilities"].numpy(), atol=1e-6)


def test_predict_question_answering(real_span_export, capsys):
    _, path, loaded = real_span_export
    assert main(["--model", path, PASSAGES[0], PASSAGES[2], "--pair", QUESTIONS[0]]) == 0
    records = _lines(capsys)
    expected = loaded.signatures["serving_default"](
        context=tf.constant([PASSAGES[0], PASSAGES[2]]), question=tf.constant([QUESTIONS[0]] * 2))
    assert [r["answer"] for r in records] == [a.decode() for a in expected["answer_text"].numpy()]
    assert PASSAGES[0][records[0]["answer_start"]:records[0]["answer_end"]] == records[0]["answer"]
    assert records[1]["answer"] == "" and records[1]["answer_start"] == -1  # empty passage


@pytest.mark.parametrize("argv_tail, message", [
    ([], "no input"),
    (["one text"], "this model takes two texts"),
    (["a", "b", "--pair", "x", "--pair", "y", "--pair", "z"], "--pair was given 3 times"),
])
def test_predict_usage_errors(real_classifier_export, capsys, argv_tail, message):
    _, path, _ = real_classifier_export
    assert main(["--model", path] + argv_tail) == 2
    assert message in capsys.readouterr().err


def test_predict_question_is_for_multiple_choice(real_classifier_export, real_span_export, capsys):
    # --question would be silently dropped by a model that has no question input.
    for (_, path, _), hint in ((real_classifier_export, "."),
                               (real_span_export, "; a question-answering model takes its question with --pair "
                                                  "(or `question` in --jsonl rows).")):
        assert main(["--model", path, "a cat", "--pair", "a dog", "--question", "who?"]) == 2
        assert capsys.readouterr().err == f"xlnet-tf predict: --question is only for multiple-choice models{hint}\n"


def test_predict_missing_model(tmp_path, capsys):
    assert main(["--model", str(tmp_path), "x"]) == 2
    assert "not a SavedModel directory" in capsys.readouterr().err


def test_predict_bad_jsonl_names_the_line(real_classifier_export, tmp_path, capsys):
    _, path, _ = real_classifier_export
    (tmp_path / "bad.jsonl").write_text('{"text": "a", "text_pair": "b"}\n{"txt": 1}\n')
    assert main(["--model", path, "--jsonl", str(tmp_path / "bad.jsonl")]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err
