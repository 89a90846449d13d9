"""A fine-tuning run continuing from a task preset: its own class, or a clear refusal before any write."""

import os

import pytest

from tests.finetuning.conftest import TINY
from tests.training.helpers import sentiment_jsonl
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.finetuning.finetuning_run import run_finetuning
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice

VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")


def _config(tmp_path, init, *extra):
    (tmp_path / "train.jsonl").write_text(sentiment_jsonl(8, 0))
    return load_finetune_config([], [
        f"task.train_file={tmp_path / 'train.jsonl'}", "task.sequence_length=16", f"training.init_from={init}",
        "training.global_batch_size=4", "training.train_steps=1", "training.steps_per_epoch=1",
        "training.verbose=0", "optimizer.warmup_steps=0", *extra])


def test_a_task_preset_of_another_task_model_is_refused_before_anything_is_written(tmp_path):
    init = str(tmp_path / "choices")
    XLNetMultipleChoice(XLNetBackbone(TINY)).save_to_preset(init, vocabulary_file=VOCABULARY)
    workdir = tmp_path / "run"
    refusal = r"task.json holds a XLNetMultipleChoice, not the XLNetClassifier of task type classification"
    with pytest.raises(ConfigError, match=refusal):
        run_finetuning(_config(tmp_path, init), str(workdir))
    assert not (workdir / "config.yaml").exists()


def test_model_overrides_on_a_task_preset_are_refused_before_anything_is_written(tmp_path):
    init = str(tmp_path / "choices")
    XLNetMultipleChoice(XLNetBackbone(TINY)).save_to_preset(init, vocabulary_file=VOCABULARY)
    workdir = tmp_path / "run"
    with pytest.raises(ConfigError, match="Continuing from a task preset keeps its dtype"):
        run_finetuning(_config(tmp_path, init, "model.dropout=0.0"), str(workdir))
    assert not workdir.exists() or not (workdir / "config.yaml").exists()
