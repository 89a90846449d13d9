import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test, tiny_config
from xlnet_tf import XLNetTokenClassifierPreprocessor, XLNetTokenizer
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

CONFIG = tiny_config()


def test_per_token_logits_do_not_depend_on_padding():
    keras.utils.set_random_seed(0)
    model = XLNetTokenClassifier(XLNetBackbone(CONFIG), num_classes=5)
    ids = np.array([[11, 12, 13, 14]], "int32")
    short = {k: v.numpy() for k, v in XLNetPacker(8)(ids).items()}
    long = {k: v.numpy() for k, v in XLNetPacker(11)(ids).items()}
    a = model(short).numpy()
    b = model(long).numpy()
    assert a.shape == (1, 8, 5) and b.shape == (1, 11, 5)
    np.testing.assert_allclose(a[:, -6:], b[:, -6:], atol=1e-5)


def test_config_round_trip():
    features = {k: v.numpy() for k, v in XLNetPacker(8)(np.array([[11, 12, 13]], "int32")).items()}
    model = run_layer_test(XLNetTokenClassifier, dict(backbone=XLNetBackbone(CONFIG), num_classes=7), features,
                           (1, 8, 7), output_dtype="float32")
    clone = XLNetTokenClassifier.from_config(model.get_config())
    assert clone.get_config() == model.get_config() and clone.num_classes == 7


SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
WORD_LISTS = 'word lists, one list of words per sentence (e.g. [["New", "York"], ["Paris"]])'


@pytest.fixture(scope="module")
def tagger():
    keras.utils.set_random_seed(0)
    preprocessor = XLNetTokenClassifierPreprocessor(XLNetTokenizer(SPIECE), sequence_length=8)
    return XLNetTokenClassifier(XLNetBackbone(tiny_config(vocabulary_size=200)), num_classes=3,
                                preprocessor=preprocessor)


def test_predict_on_ragged_word_lists_gives_each_sentence_its_own_logits(tagger):
    sentences = [["New", "York"], ["Paris"], []]  # an empty sentence packs `<sep> <cls>` alone
    together = tagger.predict(sentences, verbose=0)
    assert together.shape == (3, 8, 3)
    for row, sentence in enumerate(sentences):
        alone = tagger(tagger.preprocessor(tf.ragged.constant([sentence], dtype=tf.string)))
        np.testing.assert_allclose(together[row], alone[0], atol=1e-6)


@pytest.mark.slow  # a train step and an evaluation step are traced
def test_fit_takes_ragged_word_lists_and_labels_and_splits_them_for_validation(tagger):
    model = XLNetTokenClassifier(tagger.backbone, num_classes=3, dropout=0.0, preprocessor=tagger.preprocessor)
    model.compile(learning_rate=0.0)  # The weights stay: both losses can be computed beforehand.
    words, labels = [["New", "York"], ["Paris"], ["New"], ["York", "Paris", "New"]], [[1, 2], [1], [0], [2, 1, 0]]

    def loss(rows):
        x, y = model.preprocessor(tf.ragged.constant(words[rows]), tf.ragged.constant(labels[rows]))
        return float(model.loss(y, model(x)))

    history = model.fit(words, labels, validation_split=0.5, batch_size=2, verbose=0).history
    assert history["loss"][0] == pytest.approx(loss(slice(0, 2)), abs=1e-5)
    assert history["val_loss"][0] == pytest.approx(loss(slice(2, 4)), abs=1e-5)


def test_sentences_instead_of_word_lists_say_what_the_model_takes(tagger):
    split = " Split each sentence into its words first, e.g. [sentence.split() for sentence in sentences]."
    with pytest.raises(ValueError, match="^" + re.escape(
            f"XLNetTokenClassifier takes {WORD_LISTS}; got a list of 2 str (x[0] is 'New York')." + split) + "$"):
        tagger.predict(["New York", "Paris"], verbose=0)
    with pytest.raises(ValueError, match="^" + re.escape(
            f"XLNetTokenClassifier takes {WORD_LISTS}; got a single str 'New York'." + split) + "$"):
        tagger.predict("New York", verbose=0)
    with pytest.raises(ValueError, match=re.escape(
            f"XLNetTokenClassifierPreprocessor takes {WORD_LISTS}; got a string tensor of shape (2,)." + split)):
        tagger.preprocessor(["New York", "Paris"])


def test_a_word_without_pieces_is_refused_naming_its_row_and_column(tagger):
    message = ("XLNetTokenClassifier: every word must give at least one piece (drop empty or blank words); the "
               "word '' at x[1][1] gives none.")
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        tagger.predict([["New"], ["Paris", "", "York"]], verbose=0)
    # Invisible characters give no piece either: found on the pieces, eagerly and inside tf.data.
    with pytest.raises(ValueError, match=re.escape("the word b'\\xe2\\x80\\x8b' at x[0][1] gives none.")):
        tagger.preprocessor(tf.ragged.constant([["New", "\u200b"]]))
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([["New", "\u200b"]])).batch(1)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape("[at row] [0] [column] [1] [gives none.]")):
        tagger.predict(dataset, verbose=0)


def test_dense_word_lists_treat_trailing_empty_strings_as_padding(tagger):
    dense = np.array([["New", "York"], ["Paris", ""]])
    x, y = tagger.preprocessor(dense, np.array([[1, 2], [1, -1]]))
    ragged_x, ragged_y = tagger.preprocessor(tf.ragged.constant([["New", "York"], ["Paris"]]),
                                             tf.ragged.constant([[1, 2], [1]]))
    for key in x:
        np.testing.assert_array_equal(x[key], ragged_x[key])
    np.testing.assert_array_equal(y, ragged_y)
