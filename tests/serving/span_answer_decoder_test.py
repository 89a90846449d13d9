"""`SpanAnswerDecoder.decode` against the Python rule on hand-made beams, valid pairs or none."""

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import LENGTH
from xlnet_tf.preprocessing.squad_postprocessing import squad_best_answer
from xlnet_tf.serving.span_answer_decoder import SpanAnswerDecoder

PASSAGE = "The quick fox jumps over the lazy dog."


def window_features(num_windows):
    # Pieces 0..7 cover the passage's words; the rest (question, <sep>, <cls>) have no bytes.
    words = PASSAGE.split(" ")
    starts, ends, offset = [], [], 0
    for word in words:
        starts.append(offset)
        ends.append(offset + len(word))
        offset += len(word) + 1
    start_bytes = np.full([num_windows, LENGTH], -1, np.int32)
    end_bytes = np.full([num_windows, LENGTH], -1, np.int32)
    start_bytes[:, :len(words)] = starts
    end_bytes[:, :len(words)] = ends
    return {
        "piece_start_bytes": start_bytes,
        "piece_end_bytes": end_bytes,
        "token_is_max_context": (start_bytes >= 0).astype(np.int32),
    }


@pytest.fixture
def decoder(tokenizer):
    return SpanAnswerDecoder(tokenizer, LENGTH, max_query_length=8, doc_stride=8, max_answer_length=10)


def decode(decoder, contexts, features, row_lengths, outputs):
    as_tensors = lambda arrays: {k: tf.constant(v) for k, v in arrays.items()}  # noqa: E731
    got = decoder.decode(tf.constant(contexts), as_tensors(features), tf.constant(row_lengths), as_tensors(outputs))
    return {k: v.numpy() for k, v in got.items()}


def beam(start_index, end_index, seed):
    rng = np.random.default_rng(seed)
    num, k1 = start_index.shape
    return {
        "start_top_log_probs": np.log(rng.uniform(0.05, 0.5, [num, k1])).astype(np.float32),
        "start_top_index": start_index.astype(np.int32),
        "end_top_log_probs": np.log(rng.uniform(0.05, 0.5, end_index.shape)).astype(np.float32),
        "end_top_index": end_index.astype(np.int32),
        "cls_logits": rng.normal(size=[num]).astype(np.float32),
    }


@pytest.mark.parametrize("has_valid_pair", [True, False])
def test_decode_matches_the_python_rule(decoder, has_valid_pair):
    features = window_features(2)
    if has_valid_pair:
        start_index = np.array([[1, 30], [2, 0]])
        end_index = np.array([[[3, 0], [31, 5]], [[2, 29], [6, 1]]])
    else:
        # Every start is a non-passage piece, or every end comes before its start.
        start_index = np.array([[30, 29], [6, 7]])
        end_index = np.array([[[3, 0], [31, 5]], [[2, 1], [0, 3]]])
    outputs = beam(start_index, end_index, seed=int(has_valid_pair))
    got = decode(decoder, [PASSAGE], features, [2], outputs)
    expected = squad_best_answer(PASSAGE, features, outputs, max_answer_length=10)
    assert got["answer_text"][0].decode() == expected.text
    assert (got["answer_start"][0], got["answer_end"][0]) == (expected.char_start, expected.char_end)
    np.testing.assert_allclose(got["score"][0], expected.score, atol=1e-6)
    np.testing.assert_allclose(got["null_score"][0], expected.null_score, atol=1e-6)
    if has_valid_pair:
        assert expected.text and np.isfinite(expected.score)
    else:
        assert expected.text == "" and expected.score == -np.inf and got["answer_start"][0] == -1


def test_decode_keeps_examples_apart(decoder):
    # An example without a valid pair next to one with: each gets its own score.
    features = window_features(2)
    outputs = beam(np.array([[30, 29], [2, 0]]), np.array([[[3, 0], [31, 5]], [[4, 29], [6, 1]]]), seed=3)
    got = decode(decoder, [PASSAGE, PASSAGE], features, [1, 1], outputs)
    assert got["score"][0] == -np.inf and got["answer_text"][0] == b""
    alone = squad_best_answer(PASSAGE, {k: v[1:] for k, v in features.items()},
                              {k: v[1:] for k, v in outputs.items()}, max_answer_length=10)
    assert got["answer_text"][1].decode() == alone.text == "fox jumps over"
    np.testing.assert_allclose(got["score"][1], alone.score, atol=1e-6)


def test_decode_of_an_example_without_windows(decoder):
    features = window_features(1)
    outputs = beam(np.array([[2, 0]]), np.array([[[4, 29], [6, 1]]]), seed=4)
    got = decode(decoder, ["", PASSAGE], features, [0, 1], outputs)
    empty = squad_best_answer("", {k: v[:0] for k, v in features.items()}, {k: v[:0] for k, v in outputs.items()})
    assert got["score"][0] == empty.score == -np.inf
    assert got["null_score"][0] == empty.null_score == np.inf
    assert got["answer_text"][0] == b"" and got["answer_text"][1] == b"fox jumps over"
