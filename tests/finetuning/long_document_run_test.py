"""`xlnet-tf finetune` on long local documents (`task.max_segments` 3) with and without recurrence memory."""

import json
import os
import random

import numpy as np
import pytest
import yaml

from tests.finetuning.conftest import TINY
from xlnet_tf.cli.finetune import main
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.storage import preset_io

POSITIVE = ["good", "great", "happy", "lovely", "fine"]
NEGATIVE = ["bad", "awful", "sad", "poor", "ugly"]
FILLER = ["the", "river", "was", "a", "day", "and", "old", "house", "with"]
LENGTH, SEGMENTS = 8, 3


def _documents(path, n, seed, too_long_every=0):
    """Sentiment word first, then filler (about 12-24 pieces), so the word sits in an earlier segment
    than the last one (which holds `<cls>`). Every `too_long_every`-th document gets 20 more filler words
    and no longer fits 3 x 8 pieces. Returns the piece counts."""
    tokenizer = XLNetTokenizer("tests/testdata/tiny_spiece.model")
    rng = random.Random(seed)
    lengths = []
    with open(path, "w") as f:
        for i in range(n):
            positive = rng.random() < 0.5
            words = [rng.choice(POSITIVE if positive else NEGATIVE)] + [rng.choice(FILLER) for _ in range(7)]
            if too_long_every and i % too_long_every == 0:
                words += [rng.choice(FILLER) for _ in range(20)]
            text = " ".join(words)
            lengths.append(len(np.asarray(tokenizer(text))))
            f.write(json.dumps({"text": text, "label": "pos" if positive else "neg"}) + "\n")
    return lengths


def _finetune(preset, tmp_path, name, memory_length, capsys):
    workdir = str(tmp_path / name)
    settings = [f"task.train_file={tmp_path / 'train.jsonl'}", f"task.eval_file={tmp_path / 'eval.jsonl'}",
                f"task.sequence_length={LENGTH}", f"task.max_segments={SEGMENTS}",
                f"model.memory_length={memory_length}", "model.reuse_length=0",
                "training.global_batch_size=16", "training.train_steps=600", "training.steps_per_epoch=600",
                "optimizer.learning_rate=0.003", "optimizer.warmup_steps=10", "evaluation.every_epoch=false",
                "model.dropout=0.0", "model.attention_dropout=0.0", "task.head_dropout=0.0", "training.verbose=0"]
    assert main(["--init", preset, "--workdir", workdir, *sum((["--set", s] for s in settings), [])]) == 0
    with open(os.path.join(workdir, "eval_results.json")) as f:
        return workdir, json.load(f), capsys.readouterr().out


@pytest.mark.large
@pytest.mark.slow
def test_long_documents_train_through_memory_and_count_truncation(preset, tmp_path, capsys):
    train = _documents(tmp_path / "train.jsonl", 200, 0)
    evaluation = _documents(tmp_path / "eval.jsonl", 40, 1, too_long_every=8)
    budget = SEGMENTS * LENGTH - 2
    # Left-padded at 3 x 8, the first piece of a document of n pieces lands at 22 - n: the word never
    # reaches the last segment (positions 16-23).
    assert min(train) > LENGTH - 2
    too_long = sum(n > budget for n in evaluation)
    assert too_long == 5

    workdir, results, out = _finetune(preset, tmp_path, "memory", 2 * LENGTH, capsys)
    assert results["examples"] == 40 and results["truncated_examples"] == too_long
    assert results["accuracy"] >= 0.85, results  # the word is only in the memory of the last segment
    assert f"{too_long} of the evaluation examples were longer than" in out
    assert "segments will not see each other" not in out
    with open(os.path.join(workdir, "config.yaml")) as f:
        resolved = yaml.safe_load(f)
    assert resolved["task"]["max_segments"] == SEGMENTS and resolved["model"]["memory_length"] == 2 * LENGTH
    final = os.path.join(workdir, "final")
    assert json.load(open(os.path.join(final, "preprocessing.json")))["max_segments"] == SEGMENTS
    assert json.load(open(os.path.join(final, "config.json")))["config"]["config"]["memory_length"] == 2 * LENGTH
    # The final preset reads raw text into the same layout and keeps the memory.
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    classifier = XLNetClassifier.from_preset(final)
    assert classifier.preprocessor.max_segments == SEGMENTS
    rows = [json.loads(line) for line in open(tmp_path / "eval.jsonl")]
    predicted = classifier.predict([r["text"] for r in rows], verbose=0).argmax(-1)
    labels = [["neg", "pos"].index(r["label"]) for r in rows]
    assert np.mean(predicted == np.array(labels)) == pytest.approx(results["accuracy"])

    # The memory-off baseline: the last segment alone never sees the word.
    _, baseline, out = _finetune(preset, tmp_path, "no_memory", 0, capsys)
    assert "Warning: task.max_segments is 3 but the backbone's memory_length is 0" in out
    assert baseline["truncated_examples"] == too_long
    assert baseline["accuracy"] <= 0.75, baseline


def test_explicit_memory_settings_win_over_the_finetuning_defaults(tmp_path):
    """A pretraining preset's memory is switched off for fine-tuning unless model.* sets it."""
    path = str(tmp_path / "pretrained")
    backbone = XLNetBackbone(TINY.replace(memory_length=32, reuse_length=16))
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    backbone.save_to_preset(path, vocabulary_file="tests/testdata/tiny_spiece.model")
    saved = XLNetConfig.from_dict(preset_io.read_backbone_config(path))
    assert saved.for_finetuning({})[1] == {"memory_length": {"preset": 32, "finetune": 0},
                                            "reuse_length": {"preset": 16, "finetune": 0}}
    assert saved.for_finetuning({"memory_length": 24})[1] == {"reuse_length": {"preset": 16, "finetune": 0}}
    assert saved.for_finetuning({"memory_length": 24, "reuse_length": 8})[1] == {}
