"""An exported task SavedModel loaded before `keras.utils.set_random_seed` still answers after it
(its SentencePiece model is not kept in TensorFlow's kernel cache, which seeding clears)."""

import keras
import numpy as np
import tensorflow as tf


def test_loaded_saved_model_answers_the_same_after_seeding(real_classifier_export):
    _, path, _ = real_classifier_export
    loaded = tf.saved_model.load(path)
    request = {"text": tf.constant(["a quiet river", "the fox"]), "text_pair": tf.constant(["ran by", ""])}
    before = loaded.signatures["serving_default"](**request)["probabilities"].numpy()
    again = tf.saved_model.load(path)  # a second copy shares the model; dropping it must not free it
    del again
    keras.utils.set_random_seed(5)
    after = loaded.signatures["serving_default"](**request)["probabilities"].numpy()
    np.testing.assert_array_equal(after, before)
