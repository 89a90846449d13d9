"""Hugging Face `save_pretrained` -> preset: strictness, CLI and `--verify` (no torch needed)."""

import json
import os
import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from xlnet_tf.cli import convert as cli
from xlnet_tf.convert import verify
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity")


def copy_case(tmp_path, case, edit_weights=None, edit_config=None):
    """A copy of a fixture checkpoint, optionally with its weights dict / config dict edited."""
    target = tmp_path / case
    shutil.copytree(os.path.join(FIXTURES, case), target)
    if edit_weights:
        weights = load_file(str(target / "model.safetensors"))
        edit_weights(weights)
        save_file(weights, str(target / "model.safetensors"))
    if edit_config:
        values = json.loads((target / "config.json").read_text())
        edit_config(values)
        (target / "config.json").write_text(json.dumps(values))
    return str(target)


def fixture_batch(case):
    data = np.load(os.path.join(FIXTURES, case, "io.npz"))
    keys = ("token_ids", "segment_ids", "padding_mask", "perm_mask", "target_mapping", "mems")
    inputs = {k: data["seg0_" + k] for k in keys if "seg0_" + k in data.files}
    return inputs, data["seg0_logits"]


def test_converts_and_maps_every_weight():
    pretrainer, mapping, vocabulary = convert_transformers_checkpoint(os.path.join(FIXTURES, "two_stream"))
    assert len(mapping.assigned_values) == len(pretrainer.weights)
    assert vocabulary is None
    embedding = load_file(os.path.join(FIXTURES, "two_stream", "model.safetensors"))[
        "transformer.word_embedding.weight"]
    np.testing.assert_array_equal(np.asarray(pretrainer.backbone.token_embedding.embeddings), embedding)


def test_tied_biases_become_one_shared_set():
    pretrainer, _, _ = convert_transformers_checkpoint(os.path.join(FIXTURES, "tied_relu"))
    backbone = pretrainer.backbone
    assert not backbone.config.untie_relative_bias
    assert tuple(backbone.content_attention_bias.shape) == (2, 8)
    assert backbone.config.activation == "relu"


def _add_extra_variable(weights):
    weights["sequence_summary.summary.weight"] = np.ones((16, 16), np.float32)


def _add_extra_layer(weights):
    for name in [n for n in weights if n.startswith("transformer.layer.1.")]:
        weights[name.replace("layer.1.", "layer.2.")] = weights[name]


def _set(name, value):
    """An `edit_weights` that sets one weight; `value(weights)` computes it."""
    return lambda weights: weights.__setitem__(name, value(weights))


# Each edit of the two_stream fixture and the error that names it.
BAD_CHECKPOINTS = {
    "missing variable": (
        dict(edit_weights=lambda w: w.pop("transformer.layer.1.ff.layer_2.bias")),
        r"missing source variable 'transformer\.layer\.1\.ff\.layer_2\.bias'"),
    "unknown extra variable": (
        dict(edit_weights=_add_extra_variable),
        r"unused source variable 'sequence_summary\.summary\.weight' with shape \(16, 16\)"),
    "extra layer": (
        dict(edit_weights=_add_extra_layer), r"unused source variable 'transformer\.layer\.2\.rel_attn\.q'"),
    "wrong per-layer bias shape": (
        dict(edit_weights=_set("transformer.layer.1.rel_attn.r_s_bias", lambda w: np.ones((2, 7), np.float32))),
        r"'transformer\.layer\.1\.rel_attn\.r_s_bias' has shape \(2, 7\)"),
    "untied biases that differ converted as tied": (
        dict(edit_config=lambda c: c.update(untie_r=False)),
        r"untie_r false but transformer\.layer\.\*\.rel_attn\.r_w_bias differ across layers"),
    "untied lm head": (
        dict(edit_weights=_set("lm_loss.weight", lambda w: w["transformer.word_embedding.weight"] + 1.0)),
        "'lm_loss.weight'.*differs from the word embedding"),
}


def conversion_error(tmp_path, **edits):
    """The message of the ConversionError that converting an edited two_stream copy raises."""
    with pytest.raises(ConversionError) as error:
        convert_transformers_checkpoint(copy_case(tmp_path, "two_stream", **edits))
    return str(error.value)


@pytest.mark.parametrize("name", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoint_is_refused_naming_the_variable(tmp_path, name):
    edits, pattern = BAD_CHECKPOINTS[name]
    message = conversion_error(tmp_path, **edits)
    assert re.search(pattern, message), message


def test_wrong_shape_names_both_shapes(tmp_path):
    message = conversion_error(tmp_path, edit_weights=_set("transformer.layer.0.ff.layer_1.weight",
                                                           lambda w: np.ones((33, 16), np.float32)))
    assert "transformer.layer.0.ff.layer_1.weight" in message
    assert "(16, 33)" in message and "(33, 16)" in message and "(16, 32)" in message
    assert "feedforward_intermediate" in message


def test_explicit_tied_lm_head_copy_is_accepted(tmp_path):
    def tie(weights):
        weights["lm_loss.weight"] = weights["transformer.word_embedding.weight"].copy()

    convert_transformers_checkpoint(copy_case(tmp_path, "two_stream", edit_weights=tie))


def test_directory_without_safetensors(tmp_path):
    (tmp_path / "config.json").write_text(open(os.path.join(FIXTURES, "mems", "config.json")).read())
    with pytest.raises(ConversionError, match="no model.safetensors"):
        convert_transformers_checkpoint(str(tmp_path))


def test_cli_writes_a_loadable_preset_with_vocabulary(tmp_path, capsys):
    source = copy_case(tmp_path, "gelu")
    (tmp_path / "gelu" / "spiece.model").write_bytes(b"not a real sentencepiece model")
    output = str(tmp_path / "preset")
    assert cli.main(["--source", "transformers", "--input", source, "--output", output]) == 0
    # keras-hub's layout; the vocabulary bytes are stored as given (not parsed).
    assert sorted(os.listdir(output)) == ["assets", "config.json", "lm_head.weights.h5", "metadata.json",
                                          "model.weights.h5", "spiece.model", "tokenizer.json"]
    with open(os.path.join(output, "assets", "tokenizer", "vocabulary.spm"), "rb") as f:
        assert f.read() == b"not a real sentencepiece model"
    pretrainer = XLNetPretrainer.from_preset(output)
    assert pretrainer.backbone.config.activation == "gelu"
    inputs, expected = fixture_batch("gelu")
    np.testing.assert_allclose(np.asarray(pretrainer(inputs)["logits"]), expected, atol=1e-4)
    assert "with spiece.model" in capsys.readouterr().out


def test_cli_reports_bad_checkpoint_with_exit_code(tmp_path, capsys):
    path = copy_case(tmp_path, "mems", edit_weights=lambda w: w.pop("transformer.mask_emb"))
    assert cli.main(["--source", "transformers", "--input", path, "--output", str(tmp_path / "out")]) == 1
    assert "transformer.mask_emb" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_verify_without_torch_reloads_the_preset(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(verify, "_torch_available", lambda: False)
    output = str(tmp_path / "preset")
    code = cli.main(["--source", "transformers", "--input", os.path.join(FIXTURES, "bi_data"),
                     "--output", output, "--verify"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "max abs difference to the source arrays 0" in out
    assert "verify: OK" in out


@pytest.mark.slow
def test_verify_against_pytorch_when_installed(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    code = cli.main(["--source", "transformers", "--input", os.path.join(FIXTURES, "content_left_pad"),
                     "--output", str(tmp_path / "preset"), "--verify"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "vs Hugging Face PyTorch XLNet" in out
