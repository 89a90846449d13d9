"""The work directory both runs share: one list of keys that may change on resume, worker backups."""

import contextlib

import pytest

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.storage.run_config_file import write_run_config
from xlnet_tf.training.run_setup import check_workdir, open_run_directory

PRETRAINING = {"data": {"train_files": "a/*", "vocabulary": "", "sequence_length": 16},
               "training": {"verbose": 1, "train_steps": 8},
               "distribution": {"strategy": "auto", "tpu": "", "virtual_cpu_devices": 0}}
FINETUNING = {"task": {"task_type": "classification", "data_dir": "", "train_file": "t.jsonl"},
              "training": {"verbose": 1, "train_steps": 8},
              "distribution": {"strategy": "auto", "tpu": "", "virtual_cpu_devices": 0}}


def _changed(config, section, key, value):
    return {**config, section: {**config[section], key: value}}


@pytest.mark.parametrize("config", [PRETRAINING, FINETUNING], ids=["pretraining", "finetuning"])
@pytest.mark.parametrize("section, key, value", [
    ("training", "verbose", 0), ("distribution", "strategy", "mirrored"), ("distribution", "tpu", "t1")])
def test_both_runs_resume_when_only_verbosity_or_devices_changed(tmp_path, config, section, key, value):
    import yaml

    write_run_config(str(tmp_path), yaml.safe_dump(config))
    check_workdir(_changed(config, section, key, value), str(tmp_path))


@pytest.mark.parametrize("config, section, key, value", [
    (PRETRAINING, "data", "train_files", "gs://copy/*"), (FINETUNING, "task", "data_dir", "/tfds")])
def test_where_the_data_lives_may_change(tmp_path, config, section, key, value):
    import yaml

    write_run_config(str(tmp_path), yaml.safe_dump(config))
    check_workdir(_changed(config, section, key, value), str(tmp_path))


@pytest.mark.parametrize("config", [PRETRAINING, FINETUNING], ids=["pretraining", "finetuning"])
def test_any_other_change_is_refused_naming_old_and_new_value(tmp_path, config):
    import yaml

    write_run_config(str(tmp_path), yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"different config \(training.train_steps: 8 -> 9\)"):
        check_workdir(_changed(config, "training", "train_steps", 9), str(tmp_path))


def test_non_chief_workers_back_up_into_their_own_folder_and_write_nothing_else(tmp_path):
    with contextlib.ExitStack() as run_scope:
        directory = open_run_directory(str(tmp_path), "a: 1\n", run_scope, is_chief=False, task_id=2)
    assert directory.backup_dir == str(tmp_path / "backup" / "worker-2")
    assert directory.first_epoch == 0
    assert not (tmp_path / "config.yaml").exists() and not (tmp_path / "RUN_LOCK").exists()


def test_the_chief_locks_the_directory_and_writes_config_yaml(tmp_path):
    with contextlib.ExitStack() as run_scope:
        directory = open_run_directory(str(tmp_path), "a: 1\n", run_scope)
        assert (tmp_path / "RUN_LOCK").exists()
    assert not (tmp_path / "RUN_LOCK").exists()  # Released with the run scope.
    assert (tmp_path / "config.yaml").read_text().startswith("a: 1\n")
    assert directory.backup_callback().double_checkpoint  # Both runs keep the previous backup as .bkp.
