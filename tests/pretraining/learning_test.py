"""The train step learns: a tiny corpus's loss falls well below its unigram entropy; XLA compiles it."""

import json
import math
import os

import numpy as np
import pytest
import sentencepiece as spm

from tests.training.helpers import write_records
from xlnet_tf.pretraining.pretraining_run import run_pretraining
from xlnet_tf.pretraining.pretraining_config import load_run_config

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "testdata")
LEARNING_RUN = [
    "model.vocabulary_size=200", "model.num_layers=2", "model.num_heads=2", "model.head_dim=16",
    "model.hidden_dim=32", "model.intermediate_dim=64", "model.memory_length=16",
    "model.reuse_length=16", "model.bi_data=true", "model.dropout=0.0",
    "model.attention_dropout=0.0", "model.initializer_range=0.1", "data.sequence_length=32",
    "data.num_predict=6",
    "data.perm_size=16", "optimizer.learning_rate=0.01", "optimizer.warmup_steps=20",
    "optimizer.weight_decay=0.0", "training.global_batch_size=8", "training.train_steps=320",
    "training.steps_per_epoch=40", "training.steps_per_execution=20",
    "training.log_every_steps=20", "training.verbose=0", "distribution.strategy=one_device",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    vocabulary = os.path.join(TESTDATA, "tiny_spiece.model")
    processor = spm.SentencePieceProcessor(model_file=vocabulary)
    tokens = []
    for line in open(os.path.join(TESTDATA, "tiny_corpus.txt")):
        tokens += processor.encode(line.strip())
    counts = np.bincount(tokens)
    p = counts[counts > 0] / len(tokens)
    entropy = float(-(p * np.log(p)).sum())  # nats per token
    directory = write_records(str(tmp_path_factory.mktemp("records")), tokens + [7],
                              vocabulary_size=200, chunk_length=64, vocabulary=vocabulary)
    return directory, vocabulary, entropy


@pytest.mark.slow
def test_loss_falls_well_below_the_unigram_entropy(tmp_path, corpus):
    records, vocabulary, entropy = corpus
    config = load_run_config([], LEARNING_RUN + [f"data.train_files={records}",
                                                 f"data.vocabulary={vocabulary}"])
    workdir = str(tmp_path / "run")
    run_pretraining(config, workdir)
    lines = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    first, last = lines[0]["loss"], lines[-1]["loss"]
    assert first > 0.9 * math.log(200) * 0.9  # Starts near uniform over the vocabulary.
    assert last < 0.6 * entropy, (first, last, entropy)


def test_train_step_compiles_with_xla_at_static_pretraining_shapes(tmp_path, corpus):
    records, vocabulary, _ = corpus
    config = load_run_config([], LEARNING_RUN + [
        f"data.train_files={records}", "training.train_steps=4", "training.steps_per_epoch=2",
        "training.steps_per_execution=2", "training.jit_compile=true", "optimizer.warmup_steps=1"])
    summary = run_pretraining(config, str(tmp_path / "xla"))
    assert np.isfinite(summary["final"]["loss"])
