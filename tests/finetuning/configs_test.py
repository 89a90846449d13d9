import glob
import os

import pytest

from xlnet_tf.finetuning.finetuning_config import load_finetune_config

CONFIGS = sorted(glob.glob(os.path.join("configs", "finetune", "*.yaml")))


def test_there_is_a_config_per_task_family():
    names = {os.path.basename(p) for p in CONFIGS}
    assert {"glue_mnli.yaml", "glue_stsb.yaml", "imdb.yaml", "squad_v2.0.yaml", "race_high.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_every_shipped_config_loads_and_resolves(path):
    config = load_finetune_config([path], ["training.init_from=preset"])
    assert config.task.task_type
    assert config.training.train_steps % config.training.steps_per_epoch == 0
    if "squad" in path:
        assert config.optimizer.layer_decay == 0.75 and config.task.sequence_length == 512


def test_an_unknown_task_key_is_refused_naming_it(tmp_path):
    """`task.type` is not a key (the task type is `task.task_type`): refused, in a file or in --set."""
    from xlnet_tf.models.xlnet_config import ConfigError

    old = tmp_path / "old.yaml"
    old.write_text("task:\n  type: regression\n  train_file: train.jsonl\n")
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['task.type'\]; known keys of .*task_type"):
        load_finetune_config([str(old)], ["training.global_batch_size=8"])
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['task.type'\]"):
        load_finetune_config([], ["task.train_file=train.jsonl", "task.type=regression",
                                  "training.global_batch_size=8"])
