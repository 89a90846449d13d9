"""A run config is valid from the moment it is built: `dataclasses.replace` checks again, so no run re-checks."""

import dataclasses

import pytest

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig, finetune_config_from_dict
from xlnet_tf.pretraining.pretraining_config import RunConfig, run_config_from_dict
from xlnet_tf.tasks.task_spec import TaskSpec


def _finetune_config():
    return finetune_config_from_dict({"task": {"task_type": "classification", "train_file": "train.jsonl",
                                               "label_names": ["no", "yes"]},
                                      "training": {"global_batch_size": 8, "train_steps": 20,
                                                   "steps_per_epoch": 10, "init_from": "preset"},
                                      "optimizer": {"warmup_steps": 2}})


def _pretrain_config():
    return run_config_from_dict({"data": {"train_files": "records", "sequence_length": 16, "num_predict": 4,
                                          "perm_size": 8},
                                 "training": {"global_batch_size": 8, "train_steps": 20, "steps_per_epoch": 10},
                                 "optimizer": {"warmup_steps": 2}})


@pytest.mark.parametrize("build", [_finetune_config, _pretrain_config])
def test_a_replaced_section_is_checked_as_a_loaded_one(build):
    config = build()
    with pytest.raises(ConfigError, match=r"training.train_steps \(20\) must be a multiple of "
                                          r"training.steps_per_epoch \(7\)"):
        dataclasses.replace(config, training=dataclasses.replace(config.training, steps_per_epoch=7))
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be float, got str 'fast'"):
        dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer, learning_rate="fast"))
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be a positive finite number"):
        dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer, learning_rate=-1e-4))
    with pytest.raises(ConfigError, match="Section 'training' must be a TrainingSection, got dict"):
        dataclasses.replace(config, training={"train_steps": 20})
    # A valid change goes through and keeps every other value.
    changed = dataclasses.replace(config, training=dataclasses.replace(config.training, seed=3))
    assert changed.training.seed == 3 and changed.optimizer == config.optimizer


def test_a_python_value_is_checked_but_kept_as_given():
    config = _finetune_config()
    # An int is a fine float: kept as the int it is, and config.yaml reads back equal.
    changed = dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer, learning_rate=1))
    assert changed.optimizer.learning_rate == 1
    assert finetune_config_from_dict(changed.to_dict()) == changed
    # Strings in scientific notation are a config file's spelling, not a Python value.
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be float, got str '1e-4'"):
        dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer, learning_rate="1e-4"))


def test_the_task_section_is_checked_when_the_config_is_built():
    config = _finetune_config()
    with pytest.raises(ConfigError, match=r"task.num_classes \(3\) != len\(task.label_names\) \(2\)"):
        dataclasses.replace(config, task=config.task.replace(num_classes=3))
    with pytest.raises(ConfigError, match="task.task_type must be one of"):
        dataclasses.replace(config, task=config.task.replace(task_type="ranking"))
    with pytest.raises(ConfigError, match="task.max_segments > 1"):
        dataclasses.replace(config, task=config.task.replace(task_type="span", label_names=None, num_classes=0,
                                                             metrics=["squad"], max_segments=2))
    # A task section nobody resolved (no metrics chosen) names the builders that resolve it.
    with pytest.raises(ConfigError, match="task.metrics is null: build the config with finetune_config_from_dict"):
        FinetuneConfig(task=TaskSpec(task_type="classification", train_file="t.jsonl"), training=config.training)


def test_the_run_configs_round_trip_through_their_dicts():
    for config, from_dict in ((_finetune_config(), finetune_config_from_dict),
                              (_pretrain_config(), run_config_from_dict)):
        assert from_dict(config.to_dict()) == config
        assert isinstance(from_dict(config.to_dict()), (FinetuneConfig, RunConfig))
