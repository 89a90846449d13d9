"""Task models refuse token-id inputs they cannot read, with a message naming what and where.

Through the calls a user makes: `model(x)`, `model.predict(x)`, `model.fit(x, y)`, on numpy
inputs (checked before the data set is built) and on `tf.data` (structure from the element
spec, values batch by batch).
"""

import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config
from xlnet_tf import XLNetTokenClassifierPreprocessor, XLNetTokenizer
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")  # 200 pieces
CONFIG = tiny_config()  # vocabulary 40
VOCABULARY = "token_ids values must be in [0, 40) (the vocabulary size); got"
NO_PREPROCESSOR_HINT = (" XLNetClassifier has no preprocessor, so it reads packed ids only: "
                        "XLNetClassifierPreprocessor(tokenizer, ...)(x) packs raw text into them, and "
                        "XLNetClassifier(backbone, preprocessor=...) or XLNetClassifier.from_preset(...) builds a "
                        "model that takes the text itself.")


def features(batch=2, length=6, **replaced):
    ids = np.full((batch, length), 11, "int32")
    ids[:, -1] = 3  # <cls>
    values = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    values.update(replaced)
    return values


def with_id(row, column, value):
    ids = features()["token_ids"].copy()
    ids[row, column] = value
    return features(token_ids=ids)


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(0)
    return XLNetClassifier(XLNetBackbone(CONFIG), num_classes=2)


def exactly(message):
    return "^" + re.escape(message) + "$"


def test_ids_outside_the_vocabulary_are_refused_naming_value_row_and_column(classifier):
    too_large = f"XLNetClassifier: {VOCABULARY} 40 at row 1, column 2. Negative ids would be read as other " \
                "tokens; ids from a larger vocabulary need a model with that vocabulary."
    with pytest.raises(ValueError, match=exactly(too_large)):
        classifier.predict(with_id(1, 2, 40), verbose=0)
    with pytest.raises(ValueError, match=exactly(too_large)):
        classifier(with_id(1, 2, 40))
    with pytest.raises(ValueError, match=re.escape(f"{VOCABULARY} 40 at row 1, column 2.")):
        classifier.fit(with_id(1, 2, 40), np.array([0, 1]), verbose=0)
    # A negative id used to wrap around and predict from another token, silently.
    with pytest.raises(ValueError, match=re.escape(f"{VOCABULARY} -1 at row 0, column 4.")):
        classifier.predict(with_id(0, 4, -1), verbose=0)


def test_ids_of_a_data_set_are_checked_batch_by_batch(classifier):
    dataset = tf.data.Dataset.from_tensor_slices(with_id(1, 3, -7)).batch(2)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape(f"[XLNetClassifier: {VOCABULARY}] [-7] "
                                       "[at index (row, ..., column) of the batch] [[1 3]]")):
        classifier.predict(dataset, verbose=0)


@pytest.mark.parametrize("model_class, inputs", [
    (XLNetSpanLabeler, with_id(1, 2, 40)),
    (XLNetTokenClassifier, with_id(1, 2, 40)),
    (XLNetMultipleChoice, {k: v[:, None] for k, v in with_id(1, 2, 40).items()}),  # [B, C=1, L]
])
def test_every_task_model_refuses_ids_outside_the_vocabulary(model_class, inputs):
    model = model_class(XLNetBackbone(CONFIG))
    with pytest.raises(ValueError, match=re.escape(f"{model_class.__name__}: {VOCABULARY} 40 at row 1, column 2")):
        model.predict(inputs, verbose=0)


def test_a_tokenizer_larger_than_the_embedding_is_caught_on_its_ids():
    small = XLNetBackbone(tiny_config(vocabulary_size=20))  # the tokenizer has 200 pieces
    preprocessor = XLNetTokenClassifierPreprocessor(XLNetTokenizer(SPIECE), sequence_length=8)
    model = XLNetTokenClassifier(small, num_classes=3, preprocessor=preprocessor)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape("[XLNetTokenClassifier: token_ids values must be in [0, 20) (the vocabulary "
                                       "size); got]")):
        model.predict([["hello", "world"]], verbose=0)


def test_a_dict_without_padding_mask_says_what_the_model_takes(classifier):
    inputs = features()
    del inputs["padding_mask"]
    message = ("XLNetClassifier takes a dict of token_ids, segment_ids, padding_mask, each int [batch, length] or "
               "[batch, segments, length]; got a dict with keys ['segment_ids', 'token_ids'], missing "
               "['padding_mask'] (padding_mask: 1 on real tokens, 0 on padding: np.ones_like(token_ids) when "
               "nothing is padded)." + NO_PREPROCESSOR_HINT)
    for call in (classifier.predict, classifier):
        with pytest.raises(ValueError, match=exactly(message)):
            call(inputs)
    with pytest.raises(ValueError, match=exactly(message)):
        classifier.predict(tf.data.Dataset.from_tensor_slices(inputs).batch(2), verbose=0)


def test_a_bare_array_or_a_string_says_what_the_model_takes(classifier):
    message = ("XLNetClassifier takes a dict of token_ids, segment_ids, padding_mask, each int [batch, length] or "
               "[batch, segments, length]; got an int32 array of shape (2, 6)." + NO_PREPROCESSOR_HINT)
    with pytest.raises(TypeError, match=exactly(message)):
        classifier.predict(features()["token_ids"], verbose=0)
    with pytest.raises(TypeError, match=exactly(message)):
        classifier(features()["token_ids"])
    with pytest.raises(ValueError, match="^XLNetClassifier was built without a preprocessor, so it takes dicts of "
                                         r"packed ids .*preprocessor=XLNetClassifierPreprocessor\(tokenizer, \.\.\.\)"):
        classifier.predict("a fine film", verbose=0)


def test_float_ids_mismatched_shapes_and_empty_batches_are_refused(classifier):
    with pytest.raises(TypeError, match=exactly("XLNetClassifier: token_ids must hold integers; got float32 "
                                                "values. Cast whole-number ids with .astype('int32').")):
        classifier.predict(features(token_ids=features()["token_ids"].astype("float32")), verbose=0)
    with pytest.raises(ValueError, match=exactly("XLNetClassifier: padding_mask must have the shape of token_ids "
                                                 "(2, 6); got shape (2, 5).")):
        classifier.predict(features(padding_mask=np.ones((2, 5), "int32")), verbose=0)
    empty = {key: value[:0] for key, value in features().items()}
    for call in (classifier.predict, classifier):
        with pytest.raises(ValueError, match=exactly("XLNetClassifier: token_ids has no rows (shape (0, 6)); pass "
                                                     "at least one example.")):
            call(empty)
    with pytest.raises(ValueError, match=exactly("XLNetClassifier: padding_mask values must be 0 or 1; got 2 at "
                                                 "row 0, column 0, and 11 more out of range.")):
        classifier(features(padding_mask=np.full((2, 6), 2, "int32")))


def test_multiple_choice_names_its_shapes():
    model = XLNetMultipleChoice(XLNetBackbone(CONFIG))
    with pytest.raises(ValueError, match=exactly("XLNetMultipleChoice: token_ids must have shape [batch, choices, "
                                                 "length] or [batch, choices, segments, length]; got shape (2, 6).")):
        model.predict(features(), verbose=0)


def test_a_strings_model_given_ids_says_it_reads_text_and_which_dict_passes(classifier):
    preprocessor = XLNetTokenClassifierPreprocessor(XLNetTokenizer(SPIECE), sequence_length=8)
    model = XLNetTokenClassifier(XLNetBackbone(tiny_config(vocabulary_size=200)), preprocessor=preprocessor)
    text = 'word lists, one list of words per sentence (e.g. [["New", "York"], ["Paris"]])'
    with pytest.raises(ValueError, match=exactly(
            "XLNetTokenClassifier takes a dict of token_ids, segment_ids, padding_mask, each int [batch, length]; "
            "got a dict with keys ['token_ids'], missing ['segment_ids', 'padding_mask'] (segment_ids: 0 first "
            "text, 1 second text, 2 <cls>, 4 padding; padding_mask: 1 on real tokens, 0 on padding: "
            "np.ones_like(token_ids) when nothing is padded). With its XLNetTokenClassifierPreprocessor it also "
            f"takes raw text: {text}; model.preprocessor(x) shows the dict it packs them into.")):
        model.predict({"token_ids": features()["token_ids"]}, verbose=0)
    with pytest.raises(ValueError, match=exactly(
            "XLNetTokenClassifier takes raw text through its XLNetTokenClassifierPreprocessor: "
            f"{text}; or a dict of packed ids (token_ids, segment_ids, padding_mask, each int [batch, length]); got "
            "an int32 array of shape (2, 6). model.preprocessor(x) shows the dict it packs text into.")):
        model.predict(features()["token_ids"], verbose=0)
    # The complete dict passes the preprocessor through: the same logits as the words it packs.
    words = [["hello", "world"]]
    np.testing.assert_allclose(model.predict(preprocessor(words), verbose=0), model.predict(words, verbose=0),
                               atol=1e-6)


@pytest.mark.parametrize("bad_id", [40, -3])
def test_backbone_and_pretrainer_refuse_ids_outside_the_vocabulary(bad_id):
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    backbone = XLNetBackbone(CONFIG)
    pretrainer = XLNetPretrainer(backbone)
    good = features()
    expected = backbone(good)["sequence_output"]
    ids = good["token_ids"].copy()
    ids[1, 2] = bad_id
    message = re.escape(f"{VOCABULARY} {bad_id} at row 1, column 2.")
    for call in (backbone, backbone.predict, pretrainer.predict):
        with pytest.raises(ValueError, match=message):
            call(features(token_ids=ids))
    # The check passes valid ids through unchanged.
    np.testing.assert_array_equal(backbone.predict(good, verbose=0)["sequence_output"], expected)
