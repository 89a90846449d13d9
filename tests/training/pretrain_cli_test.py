"""`xlnet-tf pretrain` and `xlnet-tf export` end to end on a tiny model, and their bad-input errors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.pretraining.loss_curve_test import check_loss_curve, has_color
from tests.training.helpers import TINY_RUN, cyclic_tokens, write_records
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.cli import export
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.pretraining.pretraining_config import load_run_config
from xlnet_tf.storage.run_config_file import write_run_config


def _sets(extra=()):
    return sum([["--set", s] for s in list(TINY_RUN) + list(extra)], [])


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_records(str(tmp_path_factory.mktemp("records")), cyclic_tokens(4000),
                         vocabulary_size=40)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, records):
    workdir = str(tmp_path_factory.mktemp("run"))
    argv = ["--workdir", workdir, "--strategy", "one_device"] + _sets([f"data.train_files={records}"])
    assert pretrain_cli.main(argv) == 0
    return workdir


def _run_error(capsys, argv):
    assert pretrain_cli.main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("override, message", [
    ("training.global_batch_sise=4", "training.global_batch_sise"),
    ("training.train_steps=eight", "training.train_steps must be int"),
    ("model.num_layers=2.5", "XLNetConfig.num_layers must be int"),
    ("data.train_files=/nonexistent/records", "/nonexistent/records"),
    ("model.vocabulary_size=50", "Vocabulary mismatch"),
    ("training.global_batch_size=3", "does not divide"),
])
def test_bad_input_fails_before_training(tmp_path, capsys, records, override, message):
    workdir = str(tmp_path / "w")
    argv = ["--workdir", workdir, "--strategy", "mirrored"] + _sets(
        [f"data.train_files={records}", override])
    assert message in _run_error(capsys, argv)
    assert not os.path.exists(os.path.join(workdir, "metrics.jsonl"))


def test_config_file_errors_name_the_file(tmp_path, capsys, records):
    path = tmp_path / "run.yaml"
    path.write_text("training:\n  stepz: 3\n")
    err = _run_error(capsys, ["--config", str(path), "--workdir", str(tmp_path / "w")])
    assert "training.stepz" in err
    assert "config file not found" in _run_error(
        capsys, ["--config", str(tmp_path / "missing.yaml"), "--workdir", str(tmp_path / "w")]).lower()


def test_work_directory_contents(finished_run):
    names = set(os.listdir(finished_run))
    assert {"config.yaml", "metrics.jsonl", "checkpoints", "logs", "backup", "export", "loss.png"} <= names
    lines = [json.loads(line) for line in open(os.path.join(finished_run, "metrics.jsonl"))]
    assert [line["step"] for line in lines] == [2, 4, 6, 8]
    assert all(np.isfinite(line["loss"]) and 0 <= line["accuracy"] <= 1 for line in lines)
    assert sorted(os.listdir(os.path.join(finished_run, "checkpoints"))) == [
        "ckpt-00000004.weights.h5", "ckpt-00000008.weights.h5"]
    assert os.listdir(os.path.join(finished_run, "logs", "train"))


def test_loss_curve_next_to_the_tensorboard_logs(finished_run):
    from xlnet_tf.pretraining.loss_curve import REFERENCE_COLORS

    image = check_loss_curve(os.path.join(finished_run, "loss.png"))
    # `xlnet-tf pretrain` draws uniform guessing only (the context-free loss needs a pass over the records).
    assert has_color(image, REFERENCE_COLORS[0]) and not has_color(image, REFERENCE_COLORS[1])


def test_backup_keeps_the_recurrence_memory_of_the_last_two_epochs(finished_run):
    backup = os.path.join(finished_run, "backup")
    names = sorted(n for n in os.listdir(backup) if n.startswith("recurrence_memory"))
    assert names == ["recurrence_memory-0-epoch-000001.npz", "recurrence_memory-0-epoch-000002.npz"]
    stored = np.load(os.path.join(backup, names[-1]))
    assert int(stored["step"]) == 8
    memory = stored["replica_0"]
    assert memory.shape == (4, 2, 8, 16)  # per-replica batch, layers, memory_length, hidden
    assert np.abs(memory).max() > 0


def test_gradient_accumulation_counts_optimizer_updates(tmp_path, records):
    from xlnet_tf.pretraining.pretraining_run import run_pretraining
    from xlnet_tf.pretraining.pretraining_config import load_run_config

    config = load_run_config([], overrides=list(TINY_RUN) + [
        f"data.train_files={records}", "training.gradient_accumulation_steps=2"])
    summary = run_pretraining(config, str(tmp_path / "w"))
    lines = [json.loads(line) for line in open(tmp_path / "w" / "metrics.jsonl")]
    # train_steps=8 updates of 2 micro-batches each: 16 fit batches, logged as steps 2..8.
    assert [line["step"] for line in lines] == [2, 4, 6, 8]
    assert all(line["examples_per_second"] > 0 for line in lines[1:])
    assert summary["final"]["loss"] > 0
    # The schedule (warmup 2, linear decay to 0 at step 8) reached its end: lr at update 8 is 0.
    assert lines[-1]["learning_rate"] == pytest.approx(0.0, abs=1e-9)
    assert sorted(os.listdir(tmp_path / "w" / "checkpoints")) == [
        "ckpt-00000004.weights.h5", "ckpt-00000008.weights.h5"]


def _records_of(workdir):
    return yaml.safe_load(open(os.path.join(workdir, "config.yaml")))["data"]["train_files"]


def test_a_finished_run_does_not_train_again(finished_run, capsys):
    before = open(os.path.join(finished_run, "metrics.jsonl")).read()
    config_path = os.path.join(finished_run, "config.yaml")
    with open(config_path) as f:
        recorded = yaml.safe_load(f)
    cpu = {"strategy": "OneDeviceStrategy", "replicas": 1, "device_kind": "CPU"}
    assert recorded["devices"] == cpu  # Where the run trained, recorded in config.yaml.
    # The record feeds back through --config (output, not a setting) ...
    assert load_run_config([config_path]).to_dict()["data"] == recorded["data"]
    # ... and an earlier attempt on other devices does not stop the resume.
    recorded["devices"] = {"strategy": "TPUStrategy", "replicas": 8, "device_kind": "TPU v2-8"}
    write_run_config(finished_run, yaml.safe_dump(recorded, sort_keys=False))
    argv = ["--workdir", finished_run, "--strategy", "one_device", "--no-export"] + _sets(
        [f"data.train_files={_records_of(finished_run)}"])
    assert pretrain_cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("Devices: tensorflow, OneDeviceStrategy, 1 replica, CPU: this run trains on the CPU "
                      "(no TPU or GPU in use).")
    assert "Resuming at step 8" in "\n".join(out)
    assert f"loss curve: {os.path.join(finished_run, 'loss.png')}" in out  # Redrawn at the end of the run.
    with open(config_path) as f:
        assert yaml.safe_load(f)["devices"] == cpu
    assert open(os.path.join(finished_run, "metrics.jsonl")).read() == before


def test_changed_config_in_same_workdir_is_refused(finished_run, capsys):
    argv = ["--workdir", finished_run, "--strategy", "one_device"] + _sets(
        [f"data.train_files={_records_of(finished_run)}", "optimizer.learning_rate=0.5"])
    assert "optimizer.learning_rate" in _run_error(capsys, argv)


def _token_batch():
    rng = np.random.default_rng(0)
    return rng.integers(9, 40, (2, 6)).astype("int32")


def test_exported_preset_and_saved_model_match_the_trained_backbone(finished_run):
    preset = os.path.join(finished_run, "export", "preset")
    backbone = XLNetBackbone.from_preset(preset)
    token_ids = _token_batch()
    token_ids[1, :2] = 5  # Left padding: serving_default masks <pad>.
    padding = (token_ids != 5).astype("int32")
    expected = backbone({"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
                         "padding_mask": padding})["sequence_output"].numpy()
    loaded = tf.saved_model.load(os.path.join(finished_run, "export", "saved_model"))
    served = loaded.signatures["serving_default"](token_ids=tf.constant(token_ids))
    np.testing.assert_allclose(served["sequence_output"].numpy(), expected, rtol=1e-5, atol=1e-5)
    encoded = loaded.signatures["encode"](
        token_ids=tf.constant(token_ids), segment_ids=tf.zeros_like(token_ids),
        padding_mask=tf.constant(padding))
    np.testing.assert_allclose(encoded["sequence_output"].numpy(), expected, rtol=1e-5, atol=1e-5)
    # The trained weights, not fresh ones: the LM bias moved during training.
    assert np.abs(XLNetPretrainer.from_preset(preset).lm_bias.numpy()).max() > 0


def test_export_cli_from_checkpoint_matches_the_final_export(finished_run, tmp_path):
    checkpoint = os.path.join(finished_run, "checkpoints", "ckpt-00000008.weights.h5")
    out = str(tmp_path / "exported")
    assert export.main(["--checkpoint", checkpoint, "--output", out]) == 0
    a = XLNetPretrainer.from_preset(os.path.join(out, "preset")).get_weights()
    b = XLNetPretrainer.from_preset(os.path.join(finished_run, "export", "preset")).get_weights()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert os.path.exists(os.path.join(out, "saved_model", "saved_model.pb"))


def test_export_errors(tmp_path, capsys):
    assert export.main(["--workdir", str(tmp_path), "--output", str(tmp_path / "o")]) == 2
    assert "config.yaml" in capsys.readouterr().err
    assert export.main(["--checkpoint", str(tmp_path / "nope.weights.h5"), "--config",
                        str(tmp_path / "c.yaml"), "--output", str(tmp_path / "o")]) == 2
    assert "not found" in capsys.readouterr().err.lower()
