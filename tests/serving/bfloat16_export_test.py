"""`export_task_model(dtype="bfloat16")`: bfloat16 variables, float32 outputs within the documented tolerance."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import SEQUENCE_LENGTH, make_task_model
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.serving.export_task_model import (BFLOAT16_TOLERANCE, METADATA_FILE, export_task_model,
                                                model_in_dtype)


def _xlnet_classifier(vocabulary_size=64):
    config = XLNetConfig(vocabulary_size=vocabulary_size, num_layers=2, num_heads=2, head_dim=8, hidden_dim=16,
                         intermediate_dim=32, dropout=0.0, attention_dropout=0.0, initializer_range=0.1)
    model = XLNetClassifier(XLNetBackbone(config), num_classes=3)
    model.build_with_dummy_inputs()
    return model


def _features(batch=4, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, 64, size=(batch, SEQUENCE_LENGTH)).astype(np.int32)
    padding_mask = np.ones((batch, SEQUENCE_LENGTH), np.int32)
    padding_mask[1, : SEQUENCE_LENGTH // 2] = 0
    segment_ids = np.zeros((batch, SEQUENCE_LENGTH), np.int32)
    segment_ids[:, -1] = 2
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


@pytest.fixture(scope="module")
def xlnet_export(tmp_path_factory):
    model = _xlnet_classifier()
    path = str(tmp_path_factory.mktemp("bf16") / "classifier")
    export_task_model(model, path, task="classification", sequence_length=SEQUENCE_LENGTH,
                      dtype="bfloat16")
    return model, path, tf.saved_model.load(path)


def test_variables_are_bfloat16_and_the_source_model_is_untouched(xlnet_export):
    model, path, loaded = xlnet_export
    float_variables = [v for v in loaded.model_variables if v.dtype.is_floating]
    assert float_variables and {v.dtype for v in float_variables} == {tf.bfloat16}
    assert {v.dtype for v in model.variables if "float" in v.dtype} == {"float32"}
    with open(os.path.join(path, METADATA_FILE)) as f:
        assert json.load(f)["dtype"] == "bfloat16"


def test_outputs_are_float32_within_the_bfloat16_tolerance(xlnet_export):
    model, _, loaded = xlnet_export
    features = _features()
    expected = tf.nn.softmax(model(features, training=False)).numpy()
    got = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in features.items()})
    assert got["probabilities"].dtype == tf.float32
    difference = np.abs(got["probabilities"].numpy() - expected).max()
    assert 0 < difference <= BFLOAT16_TOLERANCE  # > 0: the export really computes in bfloat16


def test_copy_matches_the_float32_model_weights_rounded():
    model = make_task_model(3)
    copy = model_in_dtype(model, "bfloat16")
    assert copy is not model
    for original, rounded in zip(model.get_weights(), copy.get_weights()):
        assert rounded.dtype != np.float32 or original.dtype != np.float32
        np.testing.assert_allclose(np.asarray(rounded, np.float32), original, rtol=1e-2, atol=1e-6)
    assert model_in_dtype(model, "float32") is model


def test_strings_in_signature_of_a_bfloat16_export(tmp_path, packer, vocabulary):
    model = make_task_model(3)
    path = str(tmp_path / "strings")
    export_task_model(model, path, task="classification", sequence_length=SEQUENCE_LENGTH,
                      preprocessor=packer, vocabulary=vocabulary, dtype="bfloat16")
    loaded = tf.saved_model.load(path)
    text = tf.constant(["hello world", "the lazy dog jumps"])
    from_text = loaded.signatures["serving_default"](text=text)["probabilities"].numpy()
    from_ids = loaded.signatures["serve_token_ids"](**packer(text))["probabilities"].numpy()
    np.testing.assert_allclose(from_text, from_ids, atol=1e-6)
    expected = tf.nn.softmax(model(packer(text), training=False)).numpy()
    np.testing.assert_allclose(from_text, expected, atol=BFLOAT16_TOLERANCE)


def test_unknown_dtype_is_named(tmp_path):
    with pytest.raises(ValueError, match="float16"):
        export_task_model(make_task_model(3), str(tmp_path / "x"), task="classification",
                          sequence_length=SEQUENCE_LENGTH, dtype="float16")


def test_cli_dtype_needs_a_fine_tuning_workdir(tmp_path, capsys):
    from xlnet_tf.cli import export

    code = export.main(["--preset", str(tmp_path), "--output", str(tmp_path / "out"),
                        "--dtype", "bfloat16"])
    assert code == 2
    assert "--dtype bfloat16 needs --workdir" in capsys.readouterr().err


@pytest.mark.slow
def test_a_task_preset_with_its_preprocessor_exports_in_bfloat16(tmp_path):
    # `xlnet-tf finetune` saves the preprocessor with the task: its tokenizer's int32 policy must stay.
    from tests.serving.conftest import SPIECE
    from xlnet_tf.models.xlnet_task import load_task_preset
    from xlnet_tf.serving.export_task_workdir import export_task_workdir

    _xlnet_classifier(vocabulary_size=200).save_to_preset(
        str(tmp_path / "preset"), vocabulary_file=SPIECE,
        preprocessing={"task_type": "classification", "sequence_length": SEQUENCE_LENGTH, "text_fields": ["text"]})
    model = load_task_preset(str(tmp_path / "preset"), load_weights=True, dtype="float32")
    assert model.preprocessor is not None
    copy = model_in_dtype(model, "bfloat16")
    assert copy.backbone.dtype_policy.name == "bfloat16"
    assert copy.preprocessor.tokenizer.dtype_policy.name == model.preprocessor.tokenizer.dtype_policy.name
    path = export_task_workdir(str(tmp_path / "preset"), str(tmp_path / "export"), dtype="bfloat16")
    loaded = tf.saved_model.load(path)
    text = tf.constant(["the lazy dog", ""])
    probabilities = loaded.signatures["serving_default"](text=text)["probabilities"].numpy()
    expected = tf.nn.softmax(model(model.preprocessor(text), training=False)).numpy()
    np.testing.assert_allclose(probabilities, expected, atol=BFLOAT16_TOLERANCE)
