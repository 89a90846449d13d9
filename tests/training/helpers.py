"""Tiny models and synthetic pretraining batches shared by the training tests."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.models.xlnet_config import XLNetConfig

VOCAB = 40
SEQ = 8
REUSE = 4
NUM_PREDICT = 3


def tiny_config(**overrides):
    values = dict(vocabulary_size=VOCAB, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8,
                  intermediate_dim=16, dropout=0.0, attention_dropout=0.0, memory_length=6,
                  reuse_length=REUSE, bi_data=False)
    values.update(overrides)
    return XLNetConfig(**values)


def synthetic_batches(num_batches, batch_size, seed=0, seq=SEQ, num_predict=NUM_PREDICT):
    """Batches shaped like `pretraining_dataset`'s, with uneven target counts per row."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        positions = np.stack([rng.choice(seq, num_predict, replace=False) for _ in range(batch_size)])
        target_mapping = np.eye(seq, dtype="float32")[positions]  # [B, P, L]
        token_ids = rng.integers(9, VOCAB, (batch_size, seq)).astype("int32")
        target_mask = (rng.random((batch_size, num_predict)) < 0.7).astype("float32")
        target_mask[0] = 1.0  # Row 0 always has every target: replicas hold different counts.
        target_mask[-1, 1:] = 0.0
        perm_mask = (rng.random((batch_size, seq, seq)) < 0.3).astype("float32")
        batches.append({
            "token_ids": token_ids,
            "segment_ids": np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch_size, 0).astype("int32"),
            "padding_mask": np.ones((batch_size, seq), "int32"),
            "perm_mask": perm_mask,
            "target_mapping": target_mapping,
            "target_ids": np.take_along_axis(token_ids, positions, 1).astype("int32"),
            "target_mask": target_mask,
        })
    return batches


def as_dataset(batches):
    return tf.data.Dataset.from_tensor_slices(
        {k: np.concatenate([b[k] for b in batches]) for k in batches[0]})


def require_two_cpus():
    if len(tf.config.list_logical_devices("CPU")) < 2:
        pytest.skip("needs 2 virtual CPU devices; TensorFlow was initialised before "
                    "tests/training/conftest.py could split the CPU (run tests/training alone)")


def write_records(directory, tokens, *, vocabulary_size, chunk_length=32, sentence_length=8,
                  vocabulary=None):
    """Writes one shard + manifest in record format v1 (notes in RECORDS.md) for `tokens`."""
    import hashlib
    import json
    import os

    os.makedirs(directory, exist_ok=True)
    tokens = [int(t) for t in tokens]
    sentences = [(i // sentence_length) % 2 for i in range(len(tokens))]
    name = "pretrain-00000-of-00001.tfrecord"
    num_records = 0
    with tf.io.TFRecordWriter(os.path.join(directory, name)) as writer:
        for start in range(0, len(tokens), chunk_length):
            feature = {
                "token_ids": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=tokens[start:start + chunk_length])),
                "sentence_ids": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=sentences[start:start + chunk_length])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                         .SerializeToString())
            num_records += 1
    vocab = {"vocabulary_size": vocabulary_size, "file": "",
             "special_ids": {"unk": 0, "bos": 1, "eos": 2, "cls": 3, "sep": 4, "pad": 5,
                             "mask": 6, "eod": 7, "eop": 8}}
    if vocabulary:
        with open(vocabulary, "rb") as f:
            vocab.update(file=vocabulary, sha256=hashlib.sha256(f.read()).hexdigest())
    manifest = {"format": "xlnet_tf.pretraining.v1", "chunk_length": chunk_length,
                "num_shards": 1,
                "shards": [{"file": name, "num_records": num_records, "num_tokens": len(tokens)}],
                "num_tokens": len(tokens),
                "documents": {"read": 1, "written": 1, "skipped": {}},
                "vocabulary": vocab, "settings": {"seed": 0}}
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return directory


def cyclic_tokens(length, period=13, first=9):
    """A stream that repeats `period` distinct ids: predictable from context, unigram entropy log(period)."""
    return [first + (i % period) for i in range(length)]


TINY_RUN = [
    "model.vocabulary_size=40", "model.num_layers=2", "model.num_heads=2", "model.head_dim=8",
    "model.hidden_dim=16", "model.intermediate_dim=32", "model.memory_length=8",
    "model.reuse_length=8", "model.bi_data=false", "model.dropout=0.0",
    "model.attention_dropout=0.0", "data.seq_length=16", "data.num_predict=4", "data.perm_size=8",
    "optimizer.learning_rate=0.003", "optimizer.warmup_steps=2", "training.global_batch_size=4",
    "training.train_steps=8", "training.steps_per_epoch=4", "training.log_every_steps=2",
    "training.verbose=0",
]


class SimulatedKill(Exception):
    """Raised where the process would have been killed."""


def kill_after_backup(monkeypatch, epochs_done):
    """Makes the next run raise `SimulatedKill` right after its backup of epoch `epochs_done` is complete.

    For work directories a SIGKILL cannot reach (`ram://` lives in the process) and for
    in-process runs; `tests/training/resume_test.py` covers the real SIGKILL. Returns a
    function that restores the callback for the resumed run.
    """
    from xlnet_tf.training.run_backup import RunBackup

    save = RunBackup.on_epoch_end

    def killed_after_backup(self, epoch, logs=None):
        save(self, epoch, logs)
        if epoch + 1 == epochs_done:
            raise SimulatedKill(f"killed after epoch {epochs_done}")

    monkeypatch.setattr(RunBackup, "on_epoch_end", killed_after_backup)
    return lambda: monkeypatch.setattr(RunBackup, "on_epoch_end", save)


SENTIMENT_WORDS = {"pos": ["good", "great", "happy", "lovely", "fine"],
                   "neg": ["bad", "awful", "sad", "poor", "ugly"]}
SENTIMENT_FILLER = ["the", "river", "was", "a", "day", "and", "old", "house", "with"]


def sentiment_jsonl(n, seed):
    """`n` JSONL lines `{"text", "label": "pos"|"neg"}`: four filler words and one sentiment word."""
    import json

    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        label = "pos" if rng.random() < 0.5 else "neg"
        words = list(rng.choice(SENTIMENT_FILLER, 4, replace=False)) + [str(rng.choice(SENTIMENT_WORDS[label]))]
        rng.shuffle(words)
        lines.append(json.dumps({"text": " ".join(words), "label": label}))
    return "\n".join(lines) + "\n"
