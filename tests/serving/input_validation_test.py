"""Serving signatures refuse malformed ids with an error naming the input."""

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import CONFIG, LENGTH
from xlnet_tf.serving.export_task_model import _probe_batch
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops

VOCAB = CONFIG["vocabulary_size"]


def _valid(batch=2, length=LENGTH):
    return _probe_batch(length, VOCAB, batch_size=batch)


def _bad_cases(length):
    """(name, feature overrides, regex the error must match)."""
    valid = _valid(length=length)
    negative = valid["token_ids"].copy()
    negative[0, -3] = -1
    too_big = valid["token_ids"].copy()
    too_big[1, -4] = VOCAB
    return [
        ("negative id", {"token_ids": negative}, rf"token_ids values must be in \[0, {VOCAB}\).*-1"),
        ("id >= vocab", {"token_ids": too_big}, rf"token_ids values must be in \[0, {VOCAB}\).*{VOCAB}"),
        ("rank 1", {k: v[0] for k, v in valid.items()}, rf"token_ids must have rank 2.*got shape.*\[{length}\]"),
        ("mismatched segment_ids", {"segment_ids": valid["segment_ids"][:1]},
         rf"segment_ids must have the shape of token_ids.*\[2 {length}\].*got shape.*\[1 {length}\]"),
        ("bad segment id", {"segment_ids": np.full_like(valid["segment_ids"], 7)},
         r"segment_ids values must be in \[0, 4\].*7"),
        ("bad padding_mask", {"padding_mask": np.full_like(valid["padding_mask"], 2)},
         r"padding_mask values must be 0 or 1.*2"),
    ]


def _call(signature, features):
    return signature(**{k: tf.constant(v, tf.int32) for k, v in features.items()})


@pytest.mark.parametrize("name, overrides, pattern", _bad_cases(LENGTH), ids=[c[0] for c in _bad_cases(LENGTH)])
def test_classifier_serve_token_ids_rejects(real_classifier_export, name, overrides, pattern):
    _, _, loaded = real_classifier_export
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        _call(loaded.signatures["serve_token_ids"], {**_valid(), **overrides})


def test_classifier_wrong_length_names_the_exported_length(real_classifier_export):
    _, _, loaded = real_classifier_export
    short = _valid(length=LENGTH - 4)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"token_ids must have shape \[batch, {LENGTH}\].*got shape.*\[2 {LENGTH - 4}\]"):
        _call(loaded.signatures["serve_token_ids"], short)


def test_classifier_valid_ids_match_the_model_and_stay_core_ops(real_classifier_export):
    model, path, loaded = real_classifier_export
    features = _valid()
    expected = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    actual = _call(loaded.signatures["serve_token_ids"], features)["logits"]
    np.testing.assert_allclose(actual.numpy(), np.asarray(expected), atol=1e-5)
    # The checks add only core ops: any TensorFlow Serving build still runs the ids signature.
    assert signature_custom_ops(path)["serve_token_ids"] == []


@pytest.fixture(scope="module")
def backbone_export(tmp_path_factory):
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.serving.export_pretrained import export_saved_model
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    backbone = XLNetBackbone(XLNetConfig(**CONFIG))
    path = export_saved_model(backbone, str(tmp_path_factory.mktemp("backbone") / "saved_model"))
    return backbone, path, tf.saved_model.load(path)


@pytest.mark.parametrize("name, overrides, pattern", _bad_cases(12), ids=[c[0] for c in _bad_cases(12)])
def test_backbone_encode_rejects(backbone_export, name, overrides, pattern):
    _, _, loaded = backbone_export
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        _call(loaded.signatures["encode"], {**_valid(length=12), **overrides})


@pytest.mark.parametrize("ids, pattern", [
    (np.array([[9, -2, 4, 3]]), r"token_ids values must be in \[0, 200\).*-2"),
    (np.array([[9, 10**6, 4, 3]]), r"token_ids values must be in \[0, 200\).*1000000"),
    (np.array([9, 10, 4, 3]), r"token_ids must have rank 2.*got shape.*\[4\]"),
])
def test_backbone_serving_default_rejects(backbone_export, ids, pattern):
    _, _, loaded = backbone_export
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        loaded.signatures["serving_default"](token_ids=tf.constant(ids, tf.int32))


def test_backbone_valid_ids_match_the_model_and_stay_core_ops(backbone_export):
    backbone, path, loaded = backbone_export
    features = _valid(length=12)
    expected = backbone({k: tf.constant(v) for k, v in features.items()}, training=False)["sequence_output"]
    actual = _call(loaded.signatures["encode"], features)["sequence_output"]
    np.testing.assert_allclose(actual.numpy(), np.asarray(expected), atol=1e-5)
    assert all(ops == [] for ops in signature_custom_ops(path).values())
