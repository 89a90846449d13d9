"""`task.max_segments`, `model.memory_length` and `model.reuse_length`: defaults, checks, warning."""

import pytest

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.finetuning.finetuning_run import memory_off_warning

BASE = ["training.global_batch_size=8", "task.train_file=train.jsonl"]


def _config(*overrides):
    return load_finetune_config([], [*BASE, *overrides])


def test_defaults_are_one_segment_and_the_finetuning_memory():
    config = _config()
    assert config.task.max_segments == 1
    assert config.model.memory_length is None and config.model.reuse_length is None
    long = _config("task.max_segments=4", "model.memory_length=1536", "model.reuse_length=0")
    assert (long.task.max_segments, long.model.memory_length, long.model.reuse_length) == (4, 1536, 0)
    assert "max_segments: 4" in long.to_yaml() and "memory_length: 1536" in long.to_yaml()


@pytest.mark.parametrize("overrides, message", [
    (["task.max_segments=0"], r"task.max_segments must be >= 1, got 0"),
    (["task.max_segments=two"], r"task.max_segments must be int, got str 'two'"),
    (["task.max_segments=2", "task.task_type=token_classification", "task.num_classes=3"],
     r"task.max_segments > 1 \(got 2\) is only for the task types \['classification', 'regression', "
     r"'multiple_choice'\], not 'token_classification'"),
    (["task.max_segments=3", "task.task_type=span"], r"task.max_segments > 1 \(got 3\) .* not 'span'"),
    (["model.memory_length=-1"], r"model.memory_length must be >= 0"),
    (["model.reuse_length=-2"], r"model.reuse_length must be >= 0"),
    (["model.memory_length=true"], r"model.memory_length must be int, got bool"),
    (["model.reuse_length=200", "task.sequence_length=128"],
     r"model.reuse_length \(200\) must be <= task.sequence_length \(128\)"),
])
def test_bad_values_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(*overrides)


def test_long_tasks_of_every_allowed_type_resolve():
    for task_type in ("classification", "regression", "multiple_choice"):
        assert _config("task.max_segments=2", f"task.task_type={task_type}").task.max_segments == 2


def test_memory_off_warning_only_for_several_segments_without_memory():
    long = _config("task.max_segments=3").task
    assert "segments will not see each other" in memory_off_warning(long, 0)
    assert memory_off_warning(long, 16) is None
    assert memory_off_warning(_config().task, 0) is None
