"""`preprocessing_function`, `contains_string_data`, `describe_input`: raw Python inputs of the preprocessors."""

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function
from xlnet_tf.preprocessing.string_inputs import contains_string_data, describe_input


class _Echo(keras.layers.Layer):
    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        return x, y, sample_weight


def test_raw_inputs_become_tensors_as_in_keras_hub():
    echo = _Echo()
    x, y, weights = echo.call({"text": ["a", "b"], "ids": [[1, 2, 3], [4]], "dense": [[1, 2], [3, 4]]},
                              y=[0, 1], sample_weight=np.array([0.5, 1.0], "float32"))
    assert x["text"].dtype == tf.string and x["text"].numpy().tolist() == [b"a", b"b"]
    assert isinstance(x["ids"], tf.RaggedTensor) and x["ids"].to_list() == [[1, 2, 3], [4]]
    assert x["dense"].dtype == tf.int32 and x["dense"].numpy().tolist() == [[1, 2], [3, 4]]
    assert y.dtype == tf.int32 and weights.dtype == tf.float32
    (single,) = echo.call(("one",))[0]
    assert single.numpy() == b"one"
    strings = echo.call(np.array(["x", "y"]))[0]
    assert strings.dtype == tf.string


def test_symbolic_inputs_pass_unchanged():
    echo = _Echo()
    dataset = tf.data.Dataset.from_tensor_slices((["a", "b"], [0, 1])).batch(2).map(
        lambda x, y: echo.call(x, y=y)[:2])
    x, y = next(iter(dataset))
    assert x.numpy().tolist() == [b"a", b"b"] and y.dtype == tf.int32


def test_contains_string_data_finds_text_at_any_depth():
    assert contains_string_data({"a": [1, 2], "b": ("text",)})
    assert contains_string_data(np.array(["x"], dtype=object))
    assert contains_string_data(tf.constant(["x"]))
    assert not contains_string_data({"token_ids": np.zeros((1, 4), "int32"), "mask": tf.ones((1, 4))})


def test_describe_input_names_kind_size_dtype_and_shape():
    assert describe_input(["New York", "Paris"]) == "a list of 2 str"
    assert describe_input("New York") == "a single str 'New York'"
    assert describe_input({"token_ids": 1, "mask": 2}) == "a dict with keys ['mask', 'token_ids']"
    assert describe_input(np.zeros((2, 6), "int64")) == "an int64 array of shape (2, 6)"
    assert describe_input(np.array(["a"])) == "a string array of shape (1,)"
    assert describe_input(tf.ragged.constant([["a"], ["b", "c"]])) == "a string ragged tensor of shape (2, None)"
    assert describe_input(tf.TensorSpec(None, tf.float32)) == "a float32 tensor of unknown shape"
