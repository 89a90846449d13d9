"""`export_task_workdir` on real (tiny) task models, tokenizer and packer."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import LABELS, LENGTH, PASSAGES, QUESTIONS, SQUAD
from xlnet_tf.preprocessing.squad_postprocessing import squad_best_answer
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops
from xlnet_tf.serving.export_task_workdir import export_task_workdir
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor


def test_classifier_matches_in_memory_model(real_classifier_export, tokenizer):
    model, _, loaded = real_classifier_export
    text = ["A man plays a guitar on the stage tonight.", "", "Rain."]
    pair = ["Someone makes music.", "Nothing at all.", ""]
    features = TextPreprocessor(tokenizer, XLNetPacker(LENGTH))(tf.constant(text), tf.constant(pair))
    expected = model(features, training=False).numpy()
    strings_in = loaded.signatures["serving_default"](text=tf.constant(text), text_pair=tf.constant(pair))
    ids_in = loaded.signatures["serve_token_ids"](**features)
    np.testing.assert_allclose(strings_in["logits"].numpy(), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(ids_in["logits"].numpy(), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(strings_in["probabilities"].numpy(), tf.nn.softmax(expected).numpy(), atol=1e-5)
    assert [n.decode() for n in strings_in["label_name"].numpy()] == [LABELS[i] for i in expected.argmax(-1)]


def test_classifier_bad_inputs(real_classifier_export):
    _, _, loaded = real_classifier_export
    serve = lambda t, p: loaded.signatures["serving_default"](  # noqa: E731
        text=tf.constant(t, tf.string), text_pair=tf.constant(p, tf.string))["logits"].numpy()
    long_text = "a quiet river runs by the old mill " * 30
    batch = serve([long_text, "", b"bad \xff\xfe bytes", "ok"], ["short", "", "x", b"\xc3"])
    assert batch.shape == (4, 3) and np.all(np.isfinite(batch))
    # Mixed lengths: each row is answered as if alone (left padding, per-row packing).
    for i, (t, p) in enumerate([(long_text, "short"), ("", ""), (b"bad \xff\xfe bytes", "x"), ("ok", b"\xc3")]):
        np.testing.assert_allclose(serve([t], [p])[0], batch[i], atol=1e-5, rtol=0)
    # Longest-first truncation keeps the start of the long text: more text changes nothing.
    np.testing.assert_allclose(serve([long_text + " and more"], ["short"])[0], batch[0], atol=1e-6, rtol=0)


@pytest.mark.subprocess
def test_fresh_process_loads_both_exports(real_classifier_export, real_span_export, tmp_path):
    _, cls_path, cls_loaded = real_classifier_export
    _, span_path, span_loaded = real_span_export
    script = textwrap.dedent(f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # registers SentencePiece ops for the strings-in signatures
        c = tf.saved_model.load({cls_path!r})
        s = tf.saved_model.load({span_path!r})
        ids = tf.constant([[5] * {LENGTH - 4} + [20, 21, 4, 3]], tf.int32)
        seg = tf.constant([[4] * {LENGTH - 4} + [0, 0, 0, 2]], tf.int32)
        mask = tf.cast(ids != 5, tf.int32)
        cls_text = c.signatures["serving_default"](text=tf.constant(["a b"]), text_pair=tf.constant(["c"]))
        cls_ids = c.signatures["serve_token_ids"](token_ids=ids, segment_ids=seg, padding_mask=mask)
        span = s.signatures["serving_default"](context=tf.constant({PASSAGES!r}), question=tf.constant({QUESTIONS!r}))
        out = {{
            "cls_text": cls_text["logits"].numpy().tolist(),
            "cls_ids": cls_ids["logits"].numpy().tolist(),
            "span_text": [a.decode() for a in span["answer_text"].numpy()],
            "xlnet_tf_imported": any(m.startswith("xlnet_tf") for m in sys.modules),
        }}
        print(json.dumps(out))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["xlnet_tf_imported"] is False
    ids = tf.constant([[5] * (LENGTH - 4) + [20, 21, 4, 3]], tf.int32)
    seg = tf.constant([[4] * (LENGTH - 4) + [0, 0, 0, 2]], tf.int32)
    here_ids = cls_loaded.signatures["serve_token_ids"](
        token_ids=ids, segment_ids=seg, padding_mask=tf.cast(ids != 5, tf.int32))["logits"].numpy()
    here_text = cls_loaded.signatures["serving_default"](
        text=tf.constant(["a b"]), text_pair=tf.constant(["c"]))["logits"].numpy()
    np.testing.assert_allclose(out["cls_ids"], here_ids, atol=1e-6, rtol=0)
    np.testing.assert_allclose(out["cls_text"], here_text, atol=1e-6, rtol=0)
    here_span = span_loaded.signatures["serving_default"](
        context=tf.constant(PASSAGES), question=tf.constant(QUESTIONS))
    assert out["span_text"] == [a.decode() for a in here_span["answer_text"].numpy()]


@pytest.mark.subprocess
def test_saved_model_cli_shows_both_signatures(real_span_export):
    _, path, _ = real_span_export
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for needle in ("signature_def['serving_default']", "signature_def['serve_token_ids']",
                   "inputs['context']", "inputs['question']", "outputs['answer_text']",
                   "outputs['start_top_index']"):
        assert needle in result.stdout, needle


def test_span_answers_match_python_postprocessing(real_span_export, tokenizer):
    model, _, loaded = real_span_export
    got = loaded.signatures["serving_default"](context=tf.constant(PASSAGES), question=tf.constant(QUESTIONS))
    got = {k: v.numpy() for k, v in got.items()}
    windows = XLNetSquadPreprocessor(tokenizer, LENGTH, SQUAD["max_query_length"], SQUAD["doc_stride"])
    assert got["num_windows"][0] > 1  # the long passage really is split with the stride
    for i, (passage, question) in enumerate(zip(PASSAGES[:2], QUESTIONS[:2])):
        features = {k: v.numpy() for k, v in windows(tf.constant(passage), tf.constant(question)).items()}
        outputs = model({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask", "answer_mask")},
                        training=False)
        expected = squad_best_answer(passage, features, {k: v.numpy() for k, v in outputs.items()},
                                     max_answer_length=SQUAD["max_answer_length"])
        assert got["answer_text"][i].decode() == expected.text
        assert (got["answer_start"][i], got["answer_end"][i]) == (expected.char_start, expected.char_end)
        assert passage[got["answer_start"][i]:got["answer_end"][i]] == expected.text
        np.testing.assert_allclose(got["score"][i], expected.score, atol=1e-5)
        np.testing.assert_allclose(got["null_score"][i], expected.null_score, atol=1e-5)
    # An empty passage gets a defined empty answer.
    assert got["answer_text"][2] == b"" and got["answer_start"][2] == -1 and got["answer_end"][2] == -1


def test_span_token_ids_signature_matches_beam(real_span_export):
    model, _, loaded = real_span_export
    ids = np.full([2, LENGTH], 5, np.int32)
    ids[0, 10:] = np.arange(20, 20 + LENGTH - 10)
    ids[1, 20:] = np.arange(30, 30 + LENGTH - 20)
    ids[:, -1], ids[:, -5] = 3, 4
    seg = np.where(ids == 5, 4, 0).astype(np.int32)
    seg[:, -4:-1], seg[:, -1] = 1, 2
    features = {"token_ids": ids, "segment_ids": seg, "padding_mask": (ids != 5).astype(np.int32)}
    expected = model(features, training=False)
    got = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in features.items()})
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(got[key].numpy(), expected[key].numpy(), atol=1e-5, rtol=0)
    for key in ("start_top_index", "end_top_index"):
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())


def test_span_batch_size_mismatch_is_a_clear_error(real_span_export):
    _, _, loaded = real_span_export
    with pytest.raises(tf.errors.InvalidArgumentError, match="context and question must have the same batch size"):
        loaded.signatures["serving_default"](context=tf.constant(["a", "b"]), question=tf.constant(["q"]))


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="task.json"):
        export_task_workdir(str(tmp_path), str(tmp_path / "out"))
    preset = tmp_path / "mc"
    preset.mkdir()
    (preset / "task.json").write_text(json.dumps({"registered_name": "xlnet_tf>XLNetMultipleChoice",
                                                  "class_name": "XLNetMultipleChoice", "config": {}}))
    (preset / "preprocessing.json").write_text(json.dumps({"task_type": "multiple_choice", "sequence_length": 32}))
    with pytest.raises(ValueError, match="multiple_choice"):
        export_task_workdir(str(preset), str(tmp_path / "out"))


TF_TEXT_OPS = {"NormalizeUTF8", "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp"}


def test_token_ids_signature_needs_no_custom_ops(real_classifier_export, real_span_export):
    for _, path, _ in (real_classifier_export, real_span_export):
        ops = signature_custom_ops(path)
        assert ops["serve_token_ids"] == []  # runs on any TensorFlow Serving build
        assert ops["serving_default"] and set(ops["serving_default"]) <= TF_TEXT_OPS
        assert set(ops["<any>"]) <= TF_TEXT_OPS and "SentencepieceOp" in ops["<any>"]
        with open(os.path.join(path, "xlnet_tf_serving.json")) as f:
            assert json.load(f)["custom_ops"] == ops
