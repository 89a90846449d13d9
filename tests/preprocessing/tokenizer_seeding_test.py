"""Tokenizers built before `keras.utils.set_random_seed` keep working after it.

Seeding clears TensorFlow's kernel cache; tensorflow-text's SentencePiece model lived there, so
every tokenizer (and every task model with a preprocessor) built before the call failed with
`NotFoundError: ... SentencepieceResource does not exist`. `xlnet-tf finetune` / `pretrain`
seed, so a notebook that built a classifier and then fine-tuned in the same process lost it.
"""

import gc
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config
from xlnet_tf import XLNetBackbone, XLNetClassifier, XLNetClassifierPreprocessor, XLNetTokenizer

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
TEXTS = ["a quiet river, 1990, ran by", "the fox jumps", "", "xlnet reads text in every order"]


@pytest.mark.large
def test_classifier_built_before_seeding_predicts_the_same_and_fits():
    keras.utils.set_random_seed(0)
    preprocessor = XLNetClassifierPreprocessor(XLNetTokenizer(SPIECE), sequence_length=16)
    classifier = XLNetClassifier(XLNetBackbone(tiny_config(vocabulary_size=200)), num_classes=3,
                                 preprocessor=preprocessor)
    before = classifier.predict(TEXTS, batch_size=2, verbose=0)
    traced = tf.function(lambda texts: preprocessor(texts)["token_ids"])
    ids_before = traced(tf.constant(TEXTS)).numpy()

    keras.utils.set_random_seed(1)  # what `xlnet-tf finetune` and `pretrain` do first

    np.testing.assert_array_equal(classifier.predict(TEXTS, batch_size=2, verbose=0), before)
    np.testing.assert_array_equal(traced(tf.constant(TEXTS)).numpy(), ids_before)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(classifier(preprocessor(TEXTS))), before, atol=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, [0, 1, 2, 0])).batch(2).map(preprocessor)
    ids_through_data = np.concatenate([x["token_ids"].numpy() for x, _ in dataset])
    np.testing.assert_array_equal(ids_through_data, ids_before)
    history = classifier.fit(TEXTS, np.array([0, 1, 2, 0]), batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_dropped_tokenizer_frees_its_model():
    from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

    tokenizer = XLNetTokenizer(SPIECE)
    handle = tokenizer._sentence_piece._ids._model_resource.resource_handle
    text = tf.constant(["a quiet river"])
    arguments = {"nbest_size": 0, "alpha": 1.0, "add_bos": False, "add_eos": False, "reverse": False,
                 "out_type": tf.int32}
    assert gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(handle, text, **arguments)[0].shape[0] > 0
    del tokenizer
    gc.collect()
    try:
        gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(handle, text, **arguments)
    except tf.errors.NotFoundError:
        return
    raise AssertionError("the SentencePiece model of a dropped tokenizer was not freed")
