"""`--config NAME`, `xlnet-tf configs` and `--print-config` on the shipped configs."""

import os

import pytest
import yaml

from xlnet_tf.cli import main as cli
from xlnet_tf.cli import finetune as finetune_cli
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.training.shipped_configs import (UnknownConfigError, config_description, config_names,
                                               resolve_config, shipped_config_dir)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_names_are_the_files_of_the_top_level_configs_folder():
    # A checkout reads configs/ itself; an installed wheel carries the same files as xlnet_tf/configs.
    assert os.path.basename(shipped_config_dir()) == "configs"
    for name in ("pretrain/tiny.yaml", "finetune/glue_mrpc.yaml"):
        shipped = open(os.path.join(shipped_config_dir(), name)).read()
        assert shipped == open(os.path.join(REPO, "configs", name)).read()
    assert config_names("pretrain") == ["base", "large", "tiny"]
    finetune = config_names("finetune")
    assert {"glue_mrpc", "squad_v1.1", "local_classification"} <= set(finetune)
    assert len(finetune) == len([f for f in os.listdir(os.path.join(REPO, "configs", "finetune"))
                                 if f.endswith(".yaml")])


def test_resolve_config_takes_a_name_or_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # names work from any directory
    assert resolve_config("base", "pretrain") == os.path.join(shipped_config_dir(), "pretrain", "base.yaml")
    assert resolve_config("squad_v1.1", "finetune") == os.path.join(
        shipped_config_dir(), "finetune", "squad_v1.1.yaml")
    own = tmp_path / "mine.yaml"
    own.write_text("training:\n  train_steps: 10\n")
    assert resolve_config(str(own), "pretrain") == str(own)
    assert resolve_config("mine.yaml", "pretrain") == "mine.yaml"


def test_unknown_name_lists_the_known_names_of_its_kind():
    with pytest.raises(UnknownConfigError) as e:
        resolve_config("glue_mrpc", "pretrain")  # a finetune name is not a pretrain config
    assert str(e.value) == ("Unknown config name 'glue_mrpc' (shipped pretrain configs: base, large, "
                            "tiny; or give a path to a YAML file).")


def test_missing_path_is_not_taken_for_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownConfigError, match=r"Config file not found: configs/pretrain/base.yaml "
                                                 r"\(give a YAML path, or a name without a path: "
                                                 r"shipped pretrain configs: base, large, tiny\)"):
        resolve_config("configs/pretrain/base.yaml", "pretrain")
    with pytest.raises(UnknownConfigError, match="file not found"):
        resolve_config("base.yaml", "pretrain")


def test_description_is_the_first_comment_line(tmp_path):
    assert config_description(os.path.join(shipped_config_dir(), "pretrain", "tiny.yaml")) == (
        "A tiny XLNet that learns something in minutes on 2 CPU cores (used by `xlnet-tf quickstart`).")
    bare = tmp_path / "bare.yaml"
    bare.write_text("training:\n  train_steps: 10\n# not leading\n")
    assert config_description(str(bare)) == ""


def test_configs_command_lists_names_with_descriptions(capsys):
    assert cli.main(["configs"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "pretrain configs (xlnet-tf pretrain --config NAME):"
    assert lines[1].startswith("  base ") and "XLNet-Base (12 layers, 768 hidden, 12 heads)" in lines[1]
    assert "finetune configs (xlnet-tf finetune --config NAME):" in lines
    mrpc = next(line for line in lines if line.startswith("  glue_mrpc "))
    assert "STS-B recipe" in mrpc and len(mrpc) <= 2 + len("local_classification") + 2 + 100
    assert lines[-1] == f"Files: {shipped_config_dir()}"
    assert cli.main(["configs", "pretrain"]) == 0
    assert "finetune configs" not in capsys.readouterr().out


def test_pretrain_print_config_resolves_name_and_set_without_workdir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = pretrain_cli.main(["--config", "base", "--set", "training.train_steps=20000",
                              "--strategy", "one_device", "--print-config"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("# Resolved xlnet-tf pretrain config (--config base --set "
                                   "training.train_steps=20000 --set distribution.strategy=one_device).")
    printed = yaml.safe_load(out)
    assert printed["model"]["hidden_dim"] == 768 and printed["training"]["train_steps"] == 20000
    assert printed["distribution"]["strategy"] == "one_device"
    # Every section and key --set accepts is there, and the print round-trips.
    from xlnet_tf.pretraining.pretraining_config import run_config_from_dict
    assert set(printed) == {"model", "data", "optimizer", "training", "distribution"}
    assert run_config_from_dict(printed).to_dict() == printed
    assert not list(tmp_path.iterdir())  # nothing was written


def test_finetune_print_config_shows_resolved_task(capsys):
    assert finetune_cli.main(["--config", "glue_mrpc", "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["task"]["dataset"] == "glue/mrpc" and printed["task"]["num_classes"] == 2
    assert {"task", "model", "optimizer", "training", "distribution", "evaluation"} == set(printed)


def test_run_without_workdir_or_with_unknown_config_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        pretrain_cli.main(["--config", "tiny"])
    assert e.value.code == 2
    assert "the following argument is required: --workdir" in capsys.readouterr().err
    assert finetune_cli.main(["--config", "glue_mrcp", "--workdir", "w"]) == 2
    assert capsys.readouterr().err.startswith(
        "xlnet-tf finetune: Unknown config name 'glue_mrcp' (shipped finetune configs: conll2003, ")


def test_quickstart_next_command_continues_from_any_directory(tmp_path):
    from xlnet_tf.cli.quickstart import next_command

    command = next_command("/w q/pretrain", "/w q/records", "/w q/spiece.model", 4000,
                           ["training.train_steps=2000"])
    assert command == ("xlnet-tf pretrain --config tiny --workdir '/w q/pretrain' --strategy one_device "
                       "--set 'data.train_files=/w q/records' --set model.vocabulary_size=4000 "
                       "--set 'data.vocabulary=/w q/spiece.model' --set training.train_steps=2000")


def test_config_file_on_another_filesystem(capsys):
    import uuid

    import tensorflow as tf

    path = f"ram://configs-{uuid.uuid4().hex}/mine.yaml"
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write("model:\n  hidden_dim: 48\n")
    assert pretrain_cli.main(["--config", "tiny", "--config", path, "--print-config"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["model"]["hidden_dim"] == 48
    missing = path.replace("mine", "missing")
    with pytest.raises(UnknownConfigError, match=f"Config file not found: {missing}"):
        resolve_config(missing, "pretrain")


def test_quickstart_bad_override_is_one_line(tmp_path, capsys):
    import shutil

    from tests.harness import write_pretraining_records
    from xlnet_tf.cli.quickstart import main as quickstart
    from xlnet_tf.formats.preset_files import VOCABULARY_FILE

    # Vocabulary and records already there: the run starts at its pretraining stage.
    vocabulary = str(tmp_path / VOCABULARY_FILE)
    shutil.copy(os.path.join(REPO, "tests", "testdata", "tiny_spiece.model"), vocabulary)
    write_pretraining_records(str(tmp_path / "records"), [(list(range(9, 60)), [0] * 51)], vocabulary=vocabulary)
    argv = ["--workdir", str(tmp_path), "--input", "unused.txt", "--set", "optimizer.warmup_steps=5000"]
    assert quickstart(argv) == 2
    assert capsys.readouterr().err == ("xlnet-tf quickstart: error: optimizer.warmup_steps (5000) exceeds "
                                       "training.train_steps (2000).\n")
    assert not (tmp_path / "pretrain").exists()
