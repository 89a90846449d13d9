"""Pretrain -> fine-tune out of the box: the quick start's preset (bi_data and memory on) fine-tunes."""

import json
import math
import os

import numpy as np
import pytest
import yaml

from tests.training.helpers import cyclic_tokens, write_records
from xlnet_tf.cli import finetune as finetune_cli
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.finetuning.finetuning_config import finetune_config_from_dict
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.storage import preset_io

VOCABULARY = "tests/testdata/tiny_spiece.model"
# The quick start's config (`--config tiny`, bi_data true, memory on), shrunk; bi_data is left to it.
SHRINK = ["model.vocabulary_size=200", "model.num_layers=2", "model.num_heads=2", "model.head_dim=8",
          "model.hidden_dim=16", "model.intermediate_dim=32", "model.memory_length=8",
          "model.reuse_length=8", "data.sequence_length=16", "data.num_predict=4", "data.perm_size=8",
          "training.global_batch_size=4", "training.train_steps=2", "training.steps_per_epoch=2",
          "training.log_every_steps=1", "training.verbose=0", "optimizer.warmup_steps=1",
          f"data.vocabulary={VOCABULARY}"]


def _sets(values):
    return sum([["--set", v] for v in values], [])


@pytest.fixture(scope="module")
def pretraining_preset(tmp_path_factory):
    records = write_records(str(tmp_path_factory.mktemp("records")), cyclic_tokens(1500),
                            vocabulary_size=200, vocabulary=VOCABULARY)
    workdir = str(tmp_path_factory.mktemp("pretrain"))
    argv = ["--config", "tiny", "--workdir", workdir, "--strategy", "one_device",
            *_sets(SHRINK + [f"data.train_files={records}"])]
    assert pretrain_cli.main(argv) == 0
    preset = os.path.join(workdir, "export", "preset")
    config = XLNetConfig.from_dict(preset_io.read_backbone_config(preset))
    assert config.bi_data and config.memory_length == 8  # what the quick start exports
    return preset


@pytest.mark.large
def test_finetune_cli_on_the_quick_start_preset_trains_and_records_the_changes(
        pretraining_preset, tmp_path, capsys):
    with open(tmp_path / "train.jsonl", "w") as f:
        for i in range(16):
            f.write(json.dumps({"text": f"a river {'good' if i % 2 else 'bad'} day",
                                "label": "pos" if i % 2 else "neg"}) + "\n")
    workdir = str(tmp_path / "run")
    argv = ["--init", pretraining_preset, "--workdir", workdir,
            *_sets([f"task.train_file={tmp_path / 'train.jsonl'}", "task.sequence_length=12",
                    "training.global_batch_size=3", "training.train_steps=2",
                    "training.steps_per_epoch=2", "training.verbose=0", "optimizer.warmup_steps=1",
                    "model.dropout=0.0"])]
    assert finetune_cli.main(argv) == 0
    assert ("bi_data true -> false, memory_length 8 -> 0, reuse_length 8 -> 0"
            in capsys.readouterr().out)
    with open(os.path.join(workdir, "config.yaml")) as f:
        resolved = yaml.safe_load(f)
    assert resolved["init_adjustments"] == {
        "bi_data": {"preset": True, "finetune": False},
        "memory_length": {"preset": 8, "finetune": 0},
        "reuse_length": {"preset": 8, "finetune": 0}}
    assert resolved["model"]["dropout"] == 0.0  # the user's override is kept
    # The record is output, not a setting: the run's own config.yaml reads back as a config.
    assert finetune_config_from_dict(resolved).model.dropout == 0.0
    losses = [line["loss"] for line in map(json.loads, open(os.path.join(workdir, "metrics.jsonl")))
              if "loss" in line]
    assert losses and all(math.isfinite(loss) for loss in losses)
    final = XLNetConfig.from_dict(preset_io.read_backbone_config(os.path.join(workdir, "final")))
    assert (final.bi_data, final.memory_length, final.reuse_length) == (False, 0, 0)
    assert final.attention_type == "bi" and final.dropout == 0.0


def test_classifier_from_the_quick_start_preset_keeps_the_weights(pretraining_preset):
    model = XLNetClassifier.from_preset(pretraining_preset, num_classes=2)
    config = model.backbone.config
    assert (config.bi_data, config.memory_length, config.reuse_length) == (False, 0, 0)
    pretrained = XLNetBackbone.from_preset(pretraining_preset)
    assert config == pretrained.config.replace(bi_data=False, memory_length=0, reuse_length=0)
    for got, want in zip(model.backbone.weights, pretrained.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=got.path)
    ones = np.ones((1, 6), "int32")  # a batch of one: bi_data would refuse it
    logits = model({"token_ids": ones * 9, "segment_ids": ones * 0, "padding_mask": ones})
    assert logits.shape == (1, 2) and np.all(np.isfinite(logits))


def test_adjustments_leave_explicit_fields_and_finetuning_presets_alone():
    pretraining = XLNetConfig(vocabulary_size=40, num_layers=1, num_heads=1, head_dim=4,
                              hidden_dim=4, intermediate_dim=8, memory_length=8, reuse_length=4,
                              bi_data=True, attention_type="uni")
    assert pretraining.finetuning_adjustments() == {
        "bi_data": (True, False), "memory_length": (8, 0), "reuse_length": (4, 0)}
    assert pretraining.finetuning_adjustments(keep={"memory_length": 8, "reuse_length": 4}) == {
        "bi_data": (True, False)}
    finetuning = pretraining.replace(bi_data=False, memory_length=0, reuse_length=0)
    assert finetuning.finetuning_adjustments() == {}
