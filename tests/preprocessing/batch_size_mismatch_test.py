"""Preprocessors refuse inputs of different batch sizes (called directly, in `tf.function`, in `tf.data`).

Every preprocessor that packs several inputs together (a text and its pair, a context
with its question and choices, a passage and its question or answers, words and their
labels) names both inputs and both sizes instead of packing garbage.
"""

import os

import pytest
import tensorflow as tf

from xlnet_tf import (XLNetClassifierPreprocessor, XLNetMultipleChoicePreprocessor, XLNetSpanLabelerPreprocessor,
                      XLNetTokenClassifierPreprocessor, XLNetTokenizer)
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH = 16


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer(SPIECE)


def _unknown_sizes(value):
    """The spec of `value` with every dimension unknown."""
    if isinstance(value, tf.RaggedTensor):
        return tf.RaggedTensorSpec([None] * value.shape.rank, value.dtype, ragged_rank=value.ragged_rank)
    return tf.TensorSpec([None] * value.shape.rank, value.dtype)


def _in_graph(preprocessor, x, y=None):
    """`preprocessor` inside a `tf.function` whose input shapes are unknown (as in a SavedModel)."""
    specs = tf.nest.map_structure(_unknown_sizes, (x, y) if y is not None else x)

    @tf.function(input_signature=[specs])
    def run(inputs):
        return preprocessor(x=inputs[0], y=inputs[1]) if y is not None else preprocessor(x=inputs)

    return run((x, y) if y is not None else x)


def _in_dataset(preprocessor, x):
    """`preprocessor` mapped over a one-element dataset of the whole batch, of unknown batch size."""
    # A 1-tuple element: `map` unpacks it into one argument, `x` whatever its structure.
    signature = (tf.nest.map_structure(_unknown_sizes, x),)
    dataset = tf.data.Dataset.from_generator(lambda: iter([(x,)]), output_signature=signature)
    return list(dataset.map(lambda inputs: preprocessor(x=inputs)))


def test_pair_classifier_names_both_sizes(tokenizer):
    preprocessor = XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    a, b = tf.constant(["The cat sat.", "A dog ran."]), tf.constant(["A cat."])
    message = "XLNetClassifierPreprocessor: text_a and text_b must have the same batch size; got 2 and 1 rows."
    with pytest.raises(ValueError, match=message):
        preprocessor(x=(a, b))
    with pytest.raises(ValueError, match="got 2 and 1 rows"):
        preprocessor(x=(["The cat sat.", "A dog ran."], ["A cat."]))  # Python lists too
    graph_message = r"text_a and text_b must have the same batch size; got\] \[2\] \[and\] \[1\] \[rows"
    with pytest.raises(tf.errors.InvalidArgumentError, match=graph_message):
        _in_graph(preprocessor, (a, b))
    with pytest.raises(tf.errors.InvalidArgumentError, match=graph_message):
        _in_dataset(preprocessor, (a, b))
    # Equal sizes are unchanged: the same rows as each pair alone.
    both = preprocessor(x=(a, tf.constant(["A cat.", "A dog."])))["token_ids"].numpy()
    alone = preprocessor(x=(a[1:], tf.constant(["A dog."])))["token_ids"].numpy()
    assert (both[1] == alone[0]).all()
    graph = _in_graph(preprocessor, (a, tf.constant(["A cat.", "A dog."])))["token_ids"].numpy()
    assert (graph == both).all()


def test_long_document_pair_classifier(tokenizer):
    preprocessor = XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH, max_segments=2)
    with pytest.raises(ValueError, match="text_a and text_b must have the same batch size; got 1 and 3 rows"):
        preprocessor(x=(["one"], ["a", "b", "c"]))


def test_packer_names_both_segments():
    packer = XLNetPacker(8)
    with pytest.raises(ValueError, match="XLNetPacker: segment A and segment B must have the same batch size; "
                                         "got 2 and 1 rows"):
        packer((tf.ragged.constant([[10, 11], [12]]), tf.ragged.constant([[20]])))
    ragged = tf.RaggedTensorSpec([None, None], tf.int32)
    run = tf.function(lambda a, b: packer((a, b)), input_signature=[ragged, ragged])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"segment A and segment B .* \[2\] \[and\] \[1\]"):
        run(tf.ragged.constant([[10, 11], [12]]), tf.ragged.constant([[20]]))


def test_multiple_choice_refuses_a_context_per_batch(tokenizer):
    preprocessor = XLNetMultipleChoicePreprocessor(tokenizer, sequence_length=LENGTH, second_max_length=8)
    # One context for two rows of choices used to be broadcast to both rows.
    x = {"context": tf.constant(["The sky is blue."]), "question": tf.constant(["Colour?", "Size?"]),
         "choices": tf.constant([["blue", "red"], ["big", "small"]])}
    with pytest.raises(ValueError, match="XLNetMultipleChoicePreprocessor: context and question must have the "
                                         "same batch size; got 1 and 2 rows."):
        preprocessor(x)
    x["question"] = tf.constant(["Colour?"])
    with pytest.raises(ValueError, match="context and choices must have the same batch size; got 1 and 2 rows."):
        preprocessor(x)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"context and choices .* \[1\] \[and\] \[2\]"):
        _in_dataset(preprocessor, x)


def test_span_labeler_checks_questions_and_answers(tokenizer):
    preprocessor = XLNetSpanLabelerPreprocessor(tokenizer, sequence_length=32, max_query_length=8, doc_stride=8)
    x = {"context": tf.constant(["The fox jumps.", "A dog sleeps."]), "question": tf.constant(["Who jumps?"])}
    with pytest.raises(ValueError, match="XLNetSpanLabelerPreprocessor: context and question must have the "
                                         "same batch size; got 2 and 1 rows."):
        preprocessor(x)
    x["question"] = tf.constant(["Who jumps?", "Who sleeps?"])
    y = {"answer_start": tf.constant([4]), "answer_text": tf.constant(["fox", "dog"])}
    with pytest.raises(ValueError, match="context and answer_start must have the same batch size; got 2 and 1"):
        preprocessor(x, y)
    # (In a graph the same `same_batch_size` check runs as an Assert, as for the other preprocessors.)


def test_token_classifier_labels_pair_up_with_words(tokenizer):
    preprocessor = XLNetTokenClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    words = tf.ragged.constant([["John", "lives", "here"], ["Rain"]])
    # Four labels for four words, but row by row they do not pair up.
    shifted = tf.ragged.constant([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="XLNetTokenClassifierPreprocessor: words and labels must have the same "
                                         "length in every row; row 0 has 3 and 2."):
        preprocessor(words, shifted)
    with pytest.raises(ValueError, match="words and labels must have the same batch size; got 2 and 1 rows"):
        preprocessor(words, tf.ragged.constant([[1, 0, 0]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"same length in every row;\] \[row lengths\] "
                                                             r"\[3 1\] \[and\] \[2 2\]"):
        _in_graph(preprocessor, words, shifted)
    _, labels = preprocessor(words, tf.ragged.constant([[1, 0, 0], [2]]))
    assert labels.shape == (2, LENGTH)
