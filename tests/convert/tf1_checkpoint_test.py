"""Original TF1 checkpoints -> preset: parity with Hugging Face outputs, strictness, CLI."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.cli import convert as cli
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint, read_tf1_checkpoint
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

pytestmark = pytest.mark.parity

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity")
TF1_CASES = ("two_stream", "tied_relu")  # Untied + tanh gelu, tied + relu.


def tf1_dir(case):
    return os.path.join(FIXTURES, case, "tf1")


def write_checkpoint(directory, arrays, config_case="two_stream"):
    """Writes `arrays` as a TF checkpoint named like a release, plus the case's xlnet_config.json."""
    os.makedirs(directory, exist_ok=True)
    names = sorted(arrays)
    tf.raw_ops.SaveV2(prefix=os.path.join(directory, "xlnet_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=[tf.constant(arrays[n]) for n in names])
    shutil.copy(os.path.join(tf1_dir(config_case), "xlnet_config.json"), directory)
    return directory


def edited(tmp_path, edit, case="two_stream"):
    arrays = read_tf1_checkpoint(os.path.join(tf1_dir(case), "xlnet_model.ckpt"))
    edit(arrays)
    return write_checkpoint(str(tmp_path / "ckpt"), arrays, config_case=case)


@pytest.mark.parametrize("case", TF1_CASES)
def test_tf1_checkpoint_reproduces_hugging_face_outputs(case):
    pretrainer, mapping, _ = convert_tf1_checkpoint(tf1_dir(case))
    data = np.load(os.path.join(FIXTURES, case, "io.npz"))
    keys = ("token_ids", "segment_ids", "padding_mask", "perm_mask", "target_mapping")
    inputs = {k: data["seg0_" + k] for k in keys if "seg0_" + k in data.files}
    outputs = pretrainer(inputs, training=False)
    np.testing.assert_allclose(np.asarray(outputs["logits"]), data["seg0_logits"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.asarray(outputs["sequence_output"]), data["seg0_hidden_states"][-1],
                               atol=1e-4, rtol=0)
    if "seg0_query_hidden_states" in data.files:
        np.testing.assert_allclose(np.asarray(outputs["query_output"]), data["seg0_query_hidden_states"][-1],
                                   atol=1e-4, rtol=0)
    assert len(mapping.assigned_values) == len(pretrainer.weights)


def test_original_config_is_translated():
    untied, _, _ = convert_tf1_checkpoint(tf1_dir("two_stream"))
    tied, _, _ = convert_tf1_checkpoint(tf1_dir("tied_relu"))
    assert untied.backbone.config.activation == "gelu_approximate"  # The original "gelu" is the tanh form.
    assert untied.backbone.config.untie_relative_bias
    assert tuple(untied.backbone.content_attention_bias.shape) == (2, 2, 8)
    assert not tied.backbone.config.untie_relative_bias
    assert tuple(tied.backbone.content_attention_bias.shape) == (2, 8)


def test_optimizer_slots_and_global_step_are_ignored():
    pretrainer, mapping, _ = convert_tf1_checkpoint(os.path.join(tf1_dir("two_stream"), "xlnet_model.ckpt"))
    ignored = mapping.finish(pretrainer)
    assert "global_step" in ignored
    assert "model/transformer/word_embedding/lookup_table/adam_m" in ignored
    assert "model/transformer/layer_0/ff/layer_1/kernel/adam_v" in ignored
    assert len(ignored) == 5


def test_missing_variable_is_named(tmp_path):
    path = edited(tmp_path, lambda a: a.pop("model/transformer/layer_1/ff/layer_2/bias"))
    with pytest.raises(ConversionError, match=r"missing source variable 'model/transformer/layer_1/ff/layer_2/bias'"):
        convert_tf1_checkpoint(path)


def test_unknown_extra_variable_is_named(tmp_path):
    def add(arrays):
        arrays["model/transformer/layer_0/rel_attn/extra/kernel"] = np.ones((16, 2, 8), np.float32)

    with pytest.raises(ConversionError, match=r"unused source variable 'model/transformer/layer_0/rel_attn/extra/"
                                              r"kernel' with shape \(16, 2, 8\)"):
        convert_tf1_checkpoint(edited(tmp_path, add))


def test_wrong_shape_names_variable_and_both_shapes(tmp_path):
    def reshape(arrays):
        arrays["model/transformer/layer_1/rel_attn/q/kernel"] = np.ones((16, 2, 9), np.float32)

    with pytest.raises(ConversionError) as error:
        convert_tf1_checkpoint(edited(tmp_path, reshape))
    message = str(error.value)
    assert "'model/transformer/layer_1/rel_attn/q/kernel' has shape (16, 2, 9)" in message
    assert "query_kernel" in message and "(16, 2, 8)" in message


def test_all_problems_are_reported_together(tmp_path):
    def break_two(arrays):
        arrays.pop("model/lm_loss/bias")
        arrays["model/transformer/r_w_bias"] = arrays["model/transformer/r_w_bias"][0]

    with pytest.raises(ConversionError) as error:
        convert_tf1_checkpoint(edited(tmp_path, break_two))
    message = str(error.value)
    assert "missing source variable 'model/lm_loss/bias'" in message
    assert "'model/transformer/r_w_bias' has shape (2, 8)" in message  # Tied shape for an untied config.


def test_untied_lm_head_is_rejected(tmp_path):
    def add_head(arrays):
        arrays["model/lm_loss/weight"] = arrays["model/transformer/word_embedding/lookup_table"] * 2

    with pytest.raises(ConversionError, match="'model/lm_loss/weight'.*differs from the word embedding"):
        convert_tf1_checkpoint(edited(tmp_path, add_head))


def test_directory_without_config_or_checkpoint(tmp_path):
    with pytest.raises(ConversionError, match="expected exactly one TF checkpoint"):
        convert_tf1_checkpoint(str(tmp_path))
    arrays = read_tf1_checkpoint(os.path.join(tf1_dir("tied_relu"), "xlnet_model.ckpt"))
    write_checkpoint(str(tmp_path / "ckpt"), arrays, config_case="tied_relu")
    os.remove(tmp_path / "ckpt" / "xlnet_config.json")
    with pytest.raises(ConversionError, match="No xlnet_config.json"):
        convert_tf1_checkpoint(str(tmp_path / "ckpt"))


def test_cli_converts_a_release_directory(tmp_path, capsys):
    release = tmp_path / "release"
    shutil.copytree(tf1_dir("tied_relu"), release)
    (release / "spiece.model").write_bytes(b"vocabulary bytes")
    output = str(tmp_path / "preset")
    assert cli.main(["--source", "tf1", "--input", str(release), "--output", output]) == 0
    out = capsys.readouterr().out
    assert "ignored 5 non-model variable(s)" in out
    assert (tmp_path / "preset" / "spiece.model").read_bytes() == b"vocabulary bytes"
    # keras-hub's layout: config.json is the serialized XLNetBackbone around the XLNetConfig.
    config = json.loads((tmp_path / "preset" / "config.json").read_text())
    assert config["registered_name"] == "xlnet_tf>XLNetBackbone"
    assert config["config"]["config"]["activation"] == "relu"
    assert config["config"]["config"]["untie_relative_bias"] is False
    pretrainer = XLNetPretrainer.from_preset(output)
    data = np.load(os.path.join(FIXTURES, "tied_relu", "io.npz"))
    inputs = {k: data["seg0_" + k] for k in ("token_ids", "segment_ids", "padding_mask")}
    np.testing.assert_allclose(np.asarray(pretrainer(inputs)["logits"]), data["seg0_logits"], atol=1e-4, rtol=0)


def test_cli_config_flag_only_for_tf1(tmp_path, capsys):
    code = cli.main(["--source", "transformers", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                     "--config", "x.json"])
    assert code == 2
    assert "--config applies to --source tf1 only" in capsys.readouterr().err
