"""Tiny models and synthetic pretraining batches shared by the training tests."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.config import XLNetConfig

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
