"""End-to-end `xlnet-tf finetune` runs on generated local data with a tiny preset."""

import json
import os
import random

import numpy as np
import pytest
import yaml

from xlnet_tf.cli.finetune import main
from xlnet_tf.models.xlnet_task import load_task_preset

POSITIVE = ["good", "great", "happy", "lovely", "fine"]
NEGATIVE = ["bad", "awful", "sad", "poor", "ugly"]
FILLER = ["the", "river", "was", "a", "day", "and", "old", "house", "with"]
COLORS = ["red", "blue", "green"]
NO_DROPOUT = ["model.dropout=0.0", "model.attention_dropout=0.0", "task.head_dropout=0.0"]


def _sentiment(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            positive = rng.random() < 0.5
            words = rng.sample(FILLER, 4) + [rng.choice(POSITIVE if positive else NEGATIVE)]
            rng.shuffle(words)
            f.write(json.dumps({"text": " ".join(words), "label": "pos" if positive else "neg"}) + "\n")


def _run(args):
    return main([*args, "--set", "training.verbose=0"])


@pytest.mark.slow
def test_classification_learns_and_writes_an_exportable_workdir(preset, tmp_path, capsys):
    _sentiment(tmp_path / "train.jsonl", 200, 0)
    _sentiment(tmp_path / "eval.jsonl", 64, 1)
    workdir = str(tmp_path / "run")
    args = ["--init", preset, "--workdir", workdir,
            "--set", f"task.train_file={tmp_path / 'train.jsonl'}",
            "--set", f"task.eval_file={tmp_path / 'eval.jsonl'}",
            "--set", "task.sequence_length=16", "--set", "training.global_batch_size=16",
            "--set", "training.train_steps=160", "--set", "training.steps_per_epoch=80",
            "--set", "optimizer.learning_rate=0.002", "--set", "optimizer.warmup_steps=10",
            "--set", "optimizer.layer_decay=0.9", *sum((["--set", s] for s in NO_DROPOUT), [])]
    assert _run(args) == 0
    # Where it trained: the start line, and the same three facts in config.yaml.
    assert ("Devices: tensorflow, _DefaultDistributionStrategy, 1 replica, CPU: this run trains on the CPU "
            "(no TPU or GPU in use).") in capsys.readouterr().out.splitlines()
    with open(os.path.join(workdir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["accuracy"] >= 0.85, results  # chance is ~0.5
    assert not results["collapsed"]
    with open(os.path.join(workdir, "config.yaml")) as f:
        resolved = yaml.safe_load(f)
    assert resolved["task"]["task_type"] == "classification"
    assert resolved["task"]["label_names"] == ["neg", "pos"]  # inferred from the file, sorted
    assert resolved["devices"] == {"strategy": "_DefaultDistributionStrategy", "replicas": 1,
                                   "device_kind": "CPU"}
    lines = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    assert [line["step"] for line in lines if line.get("split") == "eval"] == [80, 160]

    final = os.path.join(workdir, "final")
    # keras-hub's layout plus preprocessing.json (the serving metadata).
    assert sorted(os.listdir(final)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                         "preprocessing.json", "preprocessor.json", "spiece.model",
                                         "task.json", "task.weights.h5", "tokenizer.json"]
    info = json.load(open(os.path.join(final, "preprocessing.json")))
    assert info["label_names"] == ["neg", "pos"] and info["sequence_length"] == 16
    model = load_task_preset(final)
    from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    tokenizer = XLNetTokenizer(os.path.join(final, "spiece.model"))
    features = XLNetPacker(16)(tokenizer(["the old house was lovely", "the day was awful"]))
    assert model(features).numpy().argmax(-1).tolist() == [1, 0]

    # Same command again: resumes from the backup at the last epoch, nothing left to train.
    assert _run(args) == 0
    lines_after = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    assert [line["step"] for line in lines_after if "loss" in line] == \
        [line["step"] for line in lines if "loss" in line]
    # A different config in the same workdir is refused.
    assert _run([*args, "--set", "optimizer.learning_rate=0.1"]) == 2


def _color_squad(path, n=60):
    """A SQuAD 1.1 file whose answer is the one color word of each passage."""
    rng = random.Random(0)
    data = []
    for qid in range(n):
        words = rng.sample(FILLER, 5)
        color = rng.choice(COLORS)
        words.insert(rng.randrange(6), color)
        context = " ".join(words)
        data.append({"context": context, "qas": [{"id": f"q{qid}", "question": "which color?",
                     "answers": [{"text": color, "answer_start": context.index(color)}]}]})
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": data}]}
    path.write_text(json.dumps(squad))


SPAN_SETTINGS = ["--set", "task.task_type=span", "--set", "task.sequence_length=24",
                 "--set", "task.max_query_length=6", "--set", "task.doc_stride=8"]


@pytest.mark.slow
def test_span_task_from_squad_json(preset, tmp_path):
    _color_squad(tmp_path / "squad.json")
    workdir = str(tmp_path / "run")
    args = ["--init", preset, "--workdir", workdir, *SPAN_SETTINGS,
            "--set", f"task.train_file={tmp_path / 'squad.json'}",
            "--set", f"task.eval_file={tmp_path / 'squad.json'}",
            "--set", "training.global_batch_size=16",
            "--set", "training.train_steps=150", "--set", "training.steps_per_epoch=150",
            "--set", "optimizer.learning_rate=0.003", "--set", "optimizer.warmup_steps=10",
            "--set", "evaluation.every_epoch=false", *sum((["--set", s] for s in NO_DROPOUT), [])]
    assert _run(args) == 0
    results = json.load(open(os.path.join(workdir, "eval_results.json")))
    assert results["examples"] == 60
    assert results["exact_match"] >= 60.0, results  # a random span is almost never exact
    assert json.load(open(os.path.join(workdir, "final", "task.json")))["class_name"] == "XLNetSpanLabeler"


def test_bad_config_is_a_clear_error(preset, tmp_path, capsys):
    assert _run(["--init", preset, "--workdir", str(tmp_path / "w"), "--set", "task.bogus=1"]) == 2
    assert "task.bogus" in capsys.readouterr().err
    assert _run(["--init", str(tmp_path / "missing"), "--workdir", str(tmp_path / "w"),
                 "--set", "task.dataset=glue/sst2", "--set", "training.global_batch_size=8"]) == 2
    assert "not found" in capsys.readouterr().err


def _finetune_on_two_mirrored_replicas(preset, workdir, *args):
    """`xlnet-tf finetune` in a fresh process (virtual CPUs must be set up before TF starts).

    Returns:
        The lines of the run's metrics.jsonl.
    """
    import subprocess
    import sys

    command = [sys.executable, "-m", "xlnet_tf.cli.finetune", "--init", preset, "--workdir", str(workdir),
               "--strategy", "mirrored", "--virtual-cpu-devices", "2", *args,
               "--set", "training.verbose=0", "--set", "evaluation.every_epoch=false",
               "--set", "optimizer.warmup_steps=2"]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on 2 replica(s)" in result.stdout
    return [json.loads(line) for line in open(workdir / "metrics.jsonl")]


@pytest.mark.large
@pytest.mark.subprocess
@pytest.mark.slow
def test_mirrored_two_replicas_with_mixed_bfloat16_in_a_fresh_process(preset, tmp_path):
    _sentiment(tmp_path / "train.jsonl", 120, 2)
    workdir = tmp_path / "run"
    lines = _finetune_on_two_mirrored_replicas(
        preset, workdir, "--mixed-precision", "mixed_bfloat16",
        "--set", f"task.train_file={tmp_path / 'train.jsonl'}",
        "--set", "task.sequence_length=16", "--set", "training.global_batch_size=8",
        "--set", "training.train_steps=20", "--set", "training.steps_per_epoch=10")
    assert lines[-1]["step"] == 20 and np.isfinite(lines[-1]["loss"])
    assert json.load(open(workdir / "final" / "task.json"))["config"]["num_classes"] == 2


@pytest.mark.large
@pytest.mark.subprocess
@pytest.mark.slow
def test_span_task_on_two_mirrored_replicas_in_a_fresh_process(preset, tmp_path):
    # Span heads gather rows per example, so replicas' embedding gradients are IndexedSlices
    # of different lengths; they must be made dense before the cross-replica sum.
    _color_squad(tmp_path / "squad.json", n=24)
    lines = _finetune_on_two_mirrored_replicas(
        preset, tmp_path / "run", *SPAN_SETTINGS,
        "--set", f"task.train_file={tmp_path / 'squad.json'}",
        "--set", "training.global_batch_size=8", "--set", "training.train_steps=6",
        "--set", "training.steps_per_epoch=3")
    losses = [line["loss"] for line in lines if "loss" in line]
    assert lines[-1]["step"] == 6 and all(np.isfinite(losses)), lines
