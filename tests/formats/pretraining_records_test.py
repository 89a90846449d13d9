"""The v1 pretraining writer: its bytes parse as the intended `tf.train.Example`s and never change."""

import fnmatch

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import serialize_stream
from xlnet_tf.formats import pretraining_records

# Values whose varints take 1..5 bytes, around every length boundary.
EDGE_VALUES = np.array([0, 1, 127, 128, 255, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**32 - 1, 31999])


def _example(token_ids, sentence_ids):
    feature = {
        key: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
        for key, values in zip(pretraining_records.FEATURE_KEYS, (token_ids, sentence_ids))
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def test_records_are_the_intended_examples():
    bits = np.arange(EDGE_VALUES.size) % 2
    records = serialize_stream(EDGE_VALUES, bits, 4)
    assert len(records) == 4  # 13 tokens: 4 + 4 + 4 + 1
    for r, record in enumerate(records):
        chunk = slice(4 * r, 4 * r + 4)
        assert tf.train.Example.FromString(record) == _example(EDGE_VALUES[chunk], bits[chunk])


def test_bytes_are_stable():
    # Written in field order token_ids, sentence_ids (protobuf's own deterministic output sorts
    # map keys instead), so shards are byte-identical across protobuf versions: pinned here.
    assert serialize_stream([10, 11, 7], [0, 0, 1], 2) == [
        b"\n-\n\x13\n\ttoken_ids\x12\x06\x1a\x04\n\x02\n\x0b\n\x16\n\x0csentence_ids\x12\x06\x1a\x04\n\x02\x00\x00",
        b"\n+\n\x12\n\ttoken_ids\x12\x05\x1a\x03\n\x01\x07\n\x15\n\x0csentence_ids\x12\x05\x1a\x03\n\x01\x01",
    ]


def test_reader_parses_what_the_writer_wrote(tmp_path):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 70000, 50)
    sentences = (np.arange(50) // 7) % 2
    path = str(tmp_path / pretraining_records.shard_file_name(0, 1))
    with tf.io.TFRecordWriter(path) as writer:
        for record in serialize_stream(tokens, sentences, 16):
            writer.write(record)
    spec = {key: tf.io.VarLenFeature(tf.int64) for key in pretraining_records.FEATURE_KEYS}
    parsed = [tf.io.parse_single_example(raw, spec) for raw in tf.data.TFRecordDataset(path)]
    assert [int(p[pretraining_records.TOKEN_IDS_KEY].values.shape[0]) for p in parsed] == [16, 16, 16, 2]
    read_tokens = np.concatenate([p[pretraining_records.TOKEN_IDS_KEY].values.numpy() for p in parsed])
    read_sentences = np.concatenate([p[pretraining_records.SENTENCE_IDS_KEY].values.numpy() for p in parsed])
    np.testing.assert_array_equal(read_tokens, tokens)
    np.testing.assert_array_equal(read_sentences, sentences)


def test_empty_stream_and_out_of_range_ids():
    assert serialize_stream(np.zeros([0], np.int64), np.zeros([0], np.int64), 4) == []
    with pytest.raises(ValueError, match=r"ids must be in \[0, 2\*\*32\)"):
        serialize_stream([2**32], [0], 4)
    with pytest.raises(ValueError, match=r"ids must be in \[0, 2\*\*32\)"):
        serialize_stream([1], [-1], 4)


def test_shard_names_match_the_reader_glob():
    name = pretraining_records.shard_file_name(3, 16)
    assert name == "pretrain-00003-of-00016.tfrecord"
    assert name.startswith(pretraining_records.SHARD_PREFIX)
    assert fnmatch.fnmatch(name, pretraining_records.SHARD_GLOB)
    assert not fnmatch.fnmatch(pretraining_records.MANIFEST_FILE, pretraining_records.SHARD_GLOB)
