"""Fine-tuning refuses bad data files before training starts and before the work directory is written."""

import json
import os

import pytest

from xlnet_tf.cli.finetune import main

GOOD = [{"text": "a fine day", "label": "pos"}, {"text": "an awful day", "label": "neg"}]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _refused(preset, tmp_path, capsys, *sets):
    workdir = tmp_path / "run"
    argv = ["--init", preset, "--workdir", str(workdir), "--set", "training.verbose=0",
            "--set", "task.sequence_length=16", "--set", "training.global_batch_size=2",
            "--set", "training.train_steps=2", "--set", "training.steps_per_epoch=1",
            "--set", "optimizer.warmup_steps=0"]
    for value in sets:
        argv += ["--set", value]
    assert main(argv) == 2
    # Nothing written: the corrected command starts cleanly in the same work directory.
    assert not (workdir / "config.yaml").exists() and not (workdir / "metrics.jsonl").exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("labels", [None, "task.label_names=[neg, pos]"])
def test_empty_training_file_is_reported_as_empty(preset, tmp_path, capsys, labels):
    (tmp_path / "train.jsonl").write_text("\n\n")
    sets = [f"task.train_file={tmp_path / 'train.jsonl'}"] + ([labels] if labels else [])
    err = _refused(preset, tmp_path, capsys, *sets)
    assert f"task.train_file: {tmp_path / 'train.jsonl'} has no examples (the file is empty" in err
    assert "cannot be inferred" not in err


@pytest.mark.parametrize("content, message", [
    (None, "task.eval_file: Fine-tuning data file not found: {path}"),
    ('{"text": "ok", "label": "pos"}\n{"text": "broken",\n', "task.eval_file: {path}:2: not valid JSON"),
    ('{"text": "ok", "label": "maybe"}\n', "task.eval_file: {path}:1: label 'maybe' is not one of ['neg', 'pos']"),
    ('{"sentence": "ok", "label": "pos"}\n', "task.eval_file: {path}:1: missing field 'text'"),
    ("", "task.eval_file: {path} has no examples"),
])
def test_eval_file_errors_come_before_training(preset, tmp_path, capsys, content, message):
    train = _jsonl(tmp_path / "train.jsonl", GOOD)
    evaluation = tmp_path / "eval.jsonl"
    if content is not None:
        evaluation.write_text(content)
    err = _refused(preset, tmp_path, capsys, f"task.train_file={train}", f"task.eval_file={evaluation}")
    assert message.format(path=evaluation) in err


def test_eval_file_alone_is_no_training_data(preset, tmp_path, capsys):
    evaluation = _jsonl(tmp_path / "eval.jsonl", GOOD)
    err = _refused(preset, tmp_path, capsys, f"task.eval_file={evaluation}", "task.label_names=[neg, pos]")
    assert "No training data" in err and "task.train_file" in err
    assert os.listdir(tmp_path) == ["eval.jsonl"]
