"""Config values that used to train silently wrong (or fail late) are refused before anything is written."""

import math
import os

import pytest

from tests.training.helpers import TINY_RUN, cyclic_tokens, tiny_config, write_records
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.models.xlnet_config import ConfigError
from xlnet_tf.data.pretraining_records import PretrainingRecords
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.pretraining.pretraining_run import check_init_from
from xlnet_tf.pretraining.pretraining_config import load_run_config


def _sets(extra=()):
    return sum([["--set", s] for s in list(TINY_RUN) + list(extra)], [])


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    # Two "vocabularies" of the same size that differ in their pieces: only their bytes matter here.
    (root / "a.model").write_bytes(b"pieces of vocabulary A")
    (root / "b.model").write_bytes(b"pieces of vocabulary B")
    return str(root / "a.model"), str(root / "b.model")


@pytest.fixture(scope="module")
def records(tmp_path_factory, vocabularies):
    return write_records(str(tmp_path_factory.mktemp("records")), cyclic_tokens(2000),
                         vocabulary_size=40, vocabulary=vocabularies[0])


@pytest.fixture(scope="module")
def preset_with_vocabulary_b(tmp_path_factory, vocabularies):
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    preset = str(tmp_path_factory.mktemp("preset") / "p")
    XLNetPretrainer(XLNetBackbone(tiny_config(hidden_dim=16, head_dim=8, intermediate_dim=32,
                                              memory_length=8, reuse_length=8))).save_to_preset(preset)
    with open(vocabularies[1], "rb") as src, open(os.path.join(preset, "spiece.model"), "wb") as dst:
        dst.write(src.read())
    return preset


def _pretrain_error(capsys, tmp_path, extra):
    workdir = tmp_path / "w"
    argv = ["--workdir", str(workdir), "--strategy", "one_device"] + _sets(extra)
    assert pretrain_cli.main(argv) == 2
    # Refused before anything was written: the corrected command can use the same work directory.
    assert not (workdir / "config.yaml").exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("value", ["-0.001", ".nan", ".inf", "0"])
def test_pretraining_refuses_a_learning_rate_that_is_not_positive_and_finite(value):
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be a positive finite number"):
        load_run_config([], TINY_RUN + [f"optimizer.learning_rate={value}"])


@pytest.mark.parametrize("value", ["-0.001", ".nan", "0"])
def test_finetuning_refuses_the_same_learning_rates(value):
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be a positive finite number"):
        load_finetune_config([], ["task.train_file=x.jsonl", "training.global_batch_size=2",
                                  f"optimizer.learning_rate={value}"])


def test_both_configs_accept_1e_minus_3_and_agree_on_the_other_optimizer_values():
    pre = load_run_config([], TINY_RUN + ["optimizer.learning_rate=1e-3"])
    fine = load_finetune_config([], ["task.train_file=x.jsonl", "training.global_batch_size=2",
                                     "optimizer.learning_rate=1e-3"])
    assert pre.optimizer.learning_rate == fine.optimizer.learning_rate == 1e-3
    for override, message in [("optimizer.weight_decay=-0.1", "optimizer.weight_decay must be"),
                              ("optimizer.beta_2=1.0", "optimizer.beta_2 must be in [0, 1)"),
                              ("optimizer.adam_epsilon=0", "optimizer.adam_epsilon must be"),
                              ("optimizer.clip_norm=.nan", "optimizer.clip_norm must be")]:
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
            load_run_config([], TINY_RUN + [override])
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
            load_finetune_config([], ["task.train_file=x.jsonl", "training.global_batch_size=2", override])


def test_cli_learning_rate_error_writes_nothing(tmp_path, capsys, records):
    err = _pretrain_error(capsys, tmp_path, [f"data.train_files={records}", "optimizer.learning_rate=-1"])
    assert "optimizer.learning_rate must be a positive finite number (e.g. 1e-4), got -1.0" in err


@pytest.mark.parametrize("overrides, message", [
    (["data.perm_size=3"], "data.perm_size=3 must divide model.reuse_length=8"),
    (["data.perm_size=6", "model.reuse_length=6"],
     "data.perm_size=6 must divide data.sequence_length - model.reuse_length=10"),
    (["model.reuse_length=12", "model.memory_length=12"],
     "data.sequence_length=16 must exceed model.reuse_length=12 by at least 5"),
    (["data.num_predict=17"], "data.num_predict (17) exceeds the new part"),
    (["model.reuse_length=0", "data.perm_size=8", "data.num_predict=4", "model.memory_length=0",
      "data.sequence_length=16"], None),
    (["model.bi_data=true", "training.global_batch_size=3", "training.train_steps=8"],
     "model.bi_data needs an even per-replica batch"),
])
def test_reader_constraints_are_config_errors(overrides, message):
    if message is None:
        load_run_config([], TINY_RUN + overrides)  # perm_size need not divide an empty reuse part
        return
    with pytest.raises(ConfigError) as error:
        load_run_config([], TINY_RUN + overrides)
    assert message in str(error.value)


def test_cli_perm_size_error_writes_nothing(tmp_path, capsys, records):
    err = _pretrain_error(capsys, tmp_path, [f"data.train_files={records}", "data.perm_size=3"])
    assert "data.perm_size=3 must divide model.reuse_length=8" in err


def test_init_from_with_another_vocabulary_is_refused(tmp_path, capsys, records, preset_with_vocabulary_b):
    err = _pretrain_error(capsys, tmp_path, [f"data.train_files={records}",
                                             f"training.init_from={preset_with_vocabulary_b}"])
    assert "Vocabulary mismatch: training.init_from" in err
    assert "same size" in err


def test_init_from_with_the_records_vocabulary_passes(tmp_path, records, preset_with_vocabulary_b, vocabularies):
    import shutil

    preset = str(tmp_path / "same")
    shutil.copytree(preset_with_vocabulary_b, preset)
    shutil.copy(vocabularies[0], os.path.join(preset, "spiece.model"))
    config = load_run_config([], TINY_RUN + [f"data.train_files={records}", f"training.init_from={preset}"])
    check_init_from(config, PretrainingRecords(records))  # no error
    with pytest.raises(ConfigError, match="training.init_from: preset directory not found"):
        missing = load_run_config([], TINY_RUN + [f"data.train_files={records}",
                                                  f"training.init_from={tmp_path / 'nope'}"])
        check_init_from(missing, PretrainingRecords(records))
    assert math.isfinite(config.optimizer.learning_rate)
