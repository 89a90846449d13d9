"""Small pretraining records in the v1 format (`xlnet_tf/formats/README.md`), for the reader tests."""

import json
import os

import numpy as np

from tests import harness
from xlnet_tf.formats import pretraining_records

# The manifest's vocabulary checksum: one no real vocabulary has, so a reader given any
# SentencePiece model reports a checksum mismatch.
PLACEHOLDER_SHA256 = "0" * 64


def write_records(directory, shard_streams, chunk_length, *, vocabulary_size=100, manifest=True):
    """Writes one shard per (token_ids, sentence_ids) stream with the harness's record writer;
    the manifest records `PLACEHOLDER_SHA256` as the vocabulary's checksum. Returns the shard paths."""
    paths = harness.write_pretraining_records(directory, shard_streams, chunk_length,
                                              vocabulary_size=vocabulary_size, manifest=manifest)
    if manifest:
        manifest_path = os.path.join(directory, pretraining_records.MANIFEST_FILE)
        with open(manifest_path) as f:
            body = json.load(f)
        body["vocabulary"]["sha256"] = PLACEHOLDER_SHA256
        with open(manifest_path, "w") as f:
            json.dump(body, f)
    return paths


def counting_stream(start, length, sentence_length=5):
    """Tokens start, start+1, ... (so positions can be read back) with sentences of fixed length."""
    tokens = np.arange(start, start + length, dtype=np.int64)
    sentences = (np.arange(length) // sentence_length) % 2
    return tokens, sentences
