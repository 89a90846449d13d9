"""SavedModel export of task models: signatures, parity, fresh-process loading, bad input."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import SEQUENCE_LENGTH, make_task_model
from xlnet_tf.formats import serving_metadata
from xlnet_tf.serving.export_task_model import METADATA_FILE, export_task_model
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops

LABELS = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module")
def classifier():
    return make_task_model(3)


@pytest.fixture(scope="module")
def pair_export(tmp_path_factory, classifier, packer, vocabulary):
    path = str(tmp_path_factory.mktemp("export") / "pair_classifier")
    export_task_model(
        classifier, path, task="classification", sequence_length=SEQUENCE_LENGTH,
        preprocessor=packer, vocabulary=vocabulary, has_text_pair=True, label_names=LABELS,
    )
    return path, tf.saved_model.load(path)


@pytest.fixture(scope="module")
def single_export(tmp_path_factory, classifier, packer, vocabulary):
    path = str(tmp_path_factory.mktemp("export") / "single_classifier")
    export_task_model(
        classifier, path, task="classification", sequence_length=SEQUENCE_LENGTH,
        preprocessor=packer, vocabulary=vocabulary, label_names=LABELS,
    )
    return path, tf.saved_model.load(path)


def _np(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


def test_token_ids_signature_matches_in_memory_model(pair_export, classifier, packer):
    _, loaded = pair_export
    features = packer(tf.constant(["hello world", "the lazy dog jumps"]), tf.constant(["a test", ""]))
    expected = classifier(features, training=False).numpy()
    got = _np(loaded.signatures["serve_token_ids"](**features))
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"], tf.nn.softmax(expected).numpy(), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(got["label"], expected.argmax(-1))
    np.testing.assert_array_equal(got["label_name"], [LABELS[i].encode() for i in expected.argmax(-1)])


def test_text_signature_matches_in_memory_model(pair_export, classifier, packer):
    _, loaded = pair_export
    text, pair = ["hello world", "xlnet reads text"], ["a fine film", "in every order"]
    expected = classifier(packer(tf.constant(text), tf.constant(pair)), training=False).numpy()
    got = _np(loaded.signatures["serving_default"](text=tf.constant(text), text_pair=tf.constant(pair)))
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"].sum(-1), 1.0, atol=1e-6)


def test_metadata_lists_signatures(pair_export):
    path, _ = pair_export
    with open(os.path.join(path, METADATA_FILE)) as f:
        info = json.load(f)
    assert sorted(info) == sorted(serving_metadata.METADATA_KEYS)
    assert info["task_type"] == "classification" and info["has_text_pair"] and info["label_names"] == LABELS
    assert info["signatures"]["serving_default"]["inputs"] == ["text", "text_pair"]
    assert info["signatures"]["serve_token_ids"]["inputs"] == ["padding_mask", "segment_ids", "token_ids"]


# -- bad input at serving ----------------------------------------------------------------


def _serve(loaded, text):
    return _np(loaded.signatures["serving_default"](text=tf.constant(text, dtype=tf.string)))


def test_empty_string_gives_a_prediction(single_export, classifier, packer):
    _, loaded = single_export
    got = _serve(loaded, [""])
    features = packer(tf.constant([""]))
    # An empty text packs to `<sep> <cls>` and still gets a normal answer.
    np.testing.assert_array_equal(features["padding_mask"].numpy().sum(), 2)
    np.testing.assert_allclose(got["logits"], classifier(features).numpy(), atol=1e-5, rtol=0)


def test_text_longer_than_sequence_length_is_truncated(single_export, packer):
    _, loaded = single_export
    long_text = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)
    features = packer(tf.constant([long_text]))
    assert features["padding_mask"].numpy().sum() == SEQUENCE_LENGTH  # no padding left
    # Truncation keeps the start of the text: any continuation gives the same answer.
    a = _serve(loaded, [long_text])
    b = _serve(loaded, [long_text + " hello world xlnet"])
    np.testing.assert_allclose(a["logits"], b["logits"], atol=1e-6, rtol=0)


def test_invalid_utf8_is_replaced_not_fatal(single_export):
    _, loaded = single_export
    got = _serve(loaded, [b"caf\xe9 \xff\xfe hello", b"hello"])
    assert got["probabilities"].shape == (2, 3) and np.all(np.isfinite(got["probabilities"]))
    # Same answer as the text with U+FFFD in place of each bad byte.
    fixed = _serve(loaded, ["caf\ufffd \ufffd\ufffd hello".encode("utf-8")])
    np.testing.assert_allclose(got["logits"][:1], fixed["logits"], atol=1e-6, rtol=0)


def test_mixed_length_batch_equals_one_by_one(single_export):
    _, loaded = single_export
    texts = ["", "hello", "the quick brown fox jumps over the lazy dog " * 5, "a fine film with a weak ending"]
    batch = _serve(loaded, texts)
    for i, text in enumerate(texts):
        single = _serve(loaded, [text])
        np.testing.assert_allclose(batch["logits"][i], single["logits"][0], atol=1e-5, rtol=0)


def test_empty_batch(single_export):
    _, loaded = single_export
    got = _serve(loaded, np.zeros([0], dtype=object))
    assert got["logits"].shape == (0, 3) and got["label"].shape == (0,)


def test_pair_batch_size_mismatch_is_a_clear_error(pair_export):
    _, loaded = pair_export
    with pytest.raises(tf.errors.InvalidArgumentError, match="text and text_pair must have the same batch size"):
        loaded.signatures["serving_default"](text=tf.constant(["a", "b"]), text_pair=tf.constant(["c"]))


def test_wrong_sequence_length_is_rejected(pair_export):
    _, loaded = pair_export
    ids = tf.zeros([1, SEQUENCE_LENGTH + 1], tf.int32)
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        loaded.signatures["serve_token_ids"](token_ids=ids, segment_ids=ids, padding_mask=ids)


def test_existing_directory_is_not_overwritten(pair_export, classifier):
    path, _ = pair_export
    with pytest.raises(FileExistsError, match="already exists"):
        export_task_model(classifier, path, task="classification", sequence_length=SEQUENCE_LENGTH)


# -- other tasks ---------------------------------------------------------------------------


def test_token_classifier_labels_per_piece(tmp_path, packer, vocabulary):
    model = make_task_model(4, per_token=True, seed=1)
    path = str(tmp_path / "ner")
    names = ["O", "B-PER", "I-PER", "B-LOC"]
    export_task_model(model, path, task="token_classification", sequence_length=SEQUENCE_LENGTH,
                      preprocessor=packer, vocabulary=vocabulary, label_names=names)
    loaded = tf.saved_model.load(path)
    text = ["hello world", "the lazy dog"]
    got = _np(loaded.signatures["serving_default"](text=tf.constant(text)))
    features = packer(tf.constant(text))
    expected = model(features).numpy()
    mask = features["padding_mask"].numpy()
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(got["labels"], np.where(mask > 0, expected.argmax(-1), -1))
    assert got["labels"].shape == (2, SEQUENCE_LENGTH)
    pieces = [p.decode() for p in got["pieces"][0] if p]
    assert pieces[-2:] == ["<sep>", "<cls>"] and "".join(pieces[:-2]).replace("\u2581", " ").strip() == "hello world"
    assert all(n == b"" for n, m in zip(got["label_names"][0], mask[0]) if m == 0)


@pytest.mark.subprocess
def test_ids_only_export_needs_no_custom_ops(tmp_path):
    model = make_task_model(1, seed=2)
    path = str(tmp_path / "regression")
    export_task_model(model, path, task="regression", sequence_length=SEQUENCE_LENGTH)
    ids = np.full([2, SEQUENCE_LENGTH], 5, np.int32)
    ids[:, -3:] = [10, 4, 3]
    mask = (ids != 5).astype(np.int32)
    expected = model({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}).numpy()[:, 0]
    script = textwrap.dedent(f"""
        import sys, numpy as np, tensorflow as tf
        m = tf.saved_model.load({path!r})
        ids = np.array({ids.tolist()!r}, np.int32)
        out = m.signatures['serving_default'](token_ids=ids, segment_ids=np.zeros_like(ids),
                                              padding_mask=(ids != 5).astype(np.int32))
        assert 'tensorflow_text' not in sys.modules
        print(' '.join(repr(float(x)) for x in out['score'].numpy()))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                            cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose([float(x) for x in result.stdout.split()], expected, atol=1e-5, rtol=0)
    assert signature_custom_ops(path)["<any>"] == []
