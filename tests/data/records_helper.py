"""Writes small pretraining records in the v1 format of notes RECORDS.md, for tests."""

import json
import os

import numpy as np
import tensorflow as tf


def write_records(directory, shard_streams, chunk_length, *, vocabulary_size=100, manifest=True):
    """Writes one shard per (token_ids, sentence_ids) stream; returns the shard paths."""
    os.makedirs(directory, exist_ok=True)
    num_shards = len(shard_streams)
    entries, paths = [], []
    for shard, (tokens, sentences) in enumerate(shard_streams):
        name = f"pretrain-{shard:05d}-of-{num_shards:05d}.tfrecord"
        path = os.path.join(directory, name)
        num_records = 0
        with tf.io.TFRecordWriter(path) as writer:
            for begin in range(0, len(tokens), chunk_length):
                feature = {
                    "token_ids": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(t) for t in tokens[begin:begin + chunk_length]])),
                    "sentence_ids": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(s) for s in sentences[begin:begin + chunk_length]])),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                             .SerializeToString())
                num_records += 1
        entries.append({"file": name, "num_records": num_records, "num_tokens": len(tokens)})
        paths.append(path)
    if manifest:
        body = {
            "format": "xlnet_tf.pretraining.v1", "chunk_length": chunk_length,
            "num_shards": num_shards, "shards": entries,
            "num_tokens": sum(e["num_tokens"] for e in entries),
            "documents": {"read": 0, "written": 0, "skipped": {}},
            "vocabulary": {"file": "", "sha256": "0" * 64, "vocabulary_size": vocabulary_size,
                           "special_ids": {"unk": 0, "bos": 1, "eos": 2, "cls": 3, "sep": 4,
                                           "pad": 5, "mask": 6, "eod": 7, "eop": 8}},
            "settings": {"seed": 0},
        }
        with open(os.path.join(directory, "manifest.json"), "w") as f:
            json.dump(body, f)
    return paths


def counting_stream(start, length, sentence_length=5):
    """Tokens start, start+1, ... (so positions can be read back) with sentences of fixed length."""
    tokens = np.arange(start, start + length, dtype=np.int64)
    sentences = (np.arange(length) // sentence_length) % 2
    return tokens, sentences
