"""Tiny models and synthetic pretraining batches shared by the training tests."""

import numpy as np
import tensorflow as tf

from tests import harness
from xlnet_tf.optimizers import build_optimizer

VOCAB = 40
SEQ = 8
REUSE = 4
NUM_PREDICT = 3


def tiny_config(**overrides):
    """The harness's tiny config with memory, as the training tests use it."""
    return harness.tiny_config(**dict(dict(vocabulary_size=VOCAB, memory_length=6, reuse_length=REUSE,
                                           bi_data=False), **overrides))


def compiled_for_batches_of_two(model, **optimizer_settings):
    """`model` compiled with `build_optimizer` (lr 1e-2, warmup 1 of 10 steps) and the settings, for batches of 2."""
    optimizer = build_optimizer(model, learning_rate=1e-2, warmup_steps=1, train_steps=10, **optimizer_settings)
    model.compile(optimizer=optimizer)
    model.set_static_batch_size(2)
    optimizer.build(model.trainable_variables)
    return model


def synthetic_batches(num_batches, batch_size, seed=0, seq=SEQ, num_predict=NUM_PREDICT):
    """Batches shaped like `pretraining_dataset`'s, with uneven target counts per row."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        positions = np.stack([rng.choice(seq, num_predict, replace=False) for _ in range(batch_size)])
        token_ids = rng.integers(harness.FIRST_PLAIN_ID, VOCAB, (batch_size, seq)).astype("int32")
        target_mask = (rng.random((batch_size, num_predict)) < 0.7).astype("float32")
        target_mask[0] = 1.0  # Row 0 always has every target: replicas hold different counts.
        target_mask[-1, 1:] = 0.0
        perm_mask = (rng.random((batch_size, seq, seq)) < 0.3).astype("float32")
        batches.append(harness.pretraining_features(token_ids, positions, perm_mask, target_mask))
    return batches


def as_dataset(batches):
    return tf.data.Dataset.from_tensor_slices(
        {k: np.concatenate([b[k] for b in batches]) for k in batches[0]})


def write_records(directory, tokens, *, vocabulary_size, chunk_length=32, sentence_length=8,
                  vocabulary=None):
    """Writes one shard + manifest of v1 records for `tokens`, sentences of `sentence_length`."""
    sentences = [(i // sentence_length) % 2 for i in range(len(tokens))]
    harness.write_pretraining_records(directory, [(tokens, sentences)], chunk_length,
                                      vocabulary_size=vocabulary_size, vocabulary=vocabulary)
    return directory


def cyclic_tokens(length, period=13, first=9):
    """A stream that repeats `period` distinct ids: predictable from context, unigram entropy log(period)."""
    return [first + (i % period) for i in range(length)]


TINY_RUN = [
    "model.vocabulary_size=40", "model.num_layers=2", "model.num_heads=2", "model.head_dim=8",
    "model.hidden_dim=16", "model.intermediate_dim=32", "model.memory_length=8",
    "model.reuse_length=8", "model.bi_data=false", "model.dropout=0.0",
    "model.attention_dropout=0.0", "data.sequence_length=16", "data.num_predict=4", "data.perm_size=8",
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
