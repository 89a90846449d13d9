"""`preprocessing_function`: raw Python and numpy inputs of a preprocessor's `call` -> tensors, as keras-hub does."""

import functools

import keras
import numpy as np
from xlnet_tf.tensorflow_required import tensorflow as tf


def preprocessing_function(call):
    """Decorates a preprocessor's `call(self, x, y=None, sample_weight=None)` to take raw inputs.

    Called eagerly, `x`, `y` and `sample_weight` are converted first, leaf by leaf
    (dicts and tuples are walked; a list is one array-like input): a string or a
    list of strings becomes a string tensor, a list of lists of different lengths
    a `tf.RaggedTensor`, other lists and arrays int32/float tensors (Python ints,
    int64 by numpy's default, become int32, as in keras-hub). Tensors, string
    arrays and ragged tensors pass as they are. The body runs on the CPU. Inside a
    `tf.function` or a `tf.data` map the inputs are symbolic and pass unchanged.

    Args:
        call: the `call` method to wrap.

    Returns:
        The wrapped method.

    Example:
    >>> import keras_hub
    >>> import tensorflow as tf
    >>> from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function
    >>> class Upper(keras_hub.models.Preprocessor):
    ...     @preprocessing_function
    ...     def call(self, x, y=None, sample_weight=None):
    ...         return tf.strings.upper(x)
    >>> Upper()(["a quiet river"]).numpy()
    array([b'A QUIET RIVER'], dtype=object)
    """

    @functools.wraps(call)
    def wrapper(self, x, y=None, sample_weight=None, **kwargs):
        if not tf.executing_eagerly():
            return call(self, x, y=y, sample_weight=sample_weight, **kwargs)
        with tf.device("cpu"):
            x, y, sample_weight = (_to_tensors(value) for value in (x, y, sample_weight))
            return call(self, x, y=y, sample_weight=sample_weight, **kwargs)

    return wrapper


def _to_tensors(value):
    """One input as tensors (keras-hub's `convert_preprocessing_inputs` rules, TensorFlow backend)."""
    if isinstance(value, dict):
        return {key: _to_tensors(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_to_tensors(item) for item in value)
    if isinstance(value, (str, bytes)):
        return tf.constant(value)
    if isinstance(value, list):
        try:
            array = np.array(value)
        except ValueError as error:
            try:
                return tf.ragged.constant(value)  # rows of different lengths
            except ValueError:
                raise error from None
        if array.dtype.type in (np.str_, np.bytes_):
            return tf.convert_to_tensor(value)
        if array.dtype == np.int64:
            array = array.astype(np.int32)  # numpy's default int; int32 is what the ops take
        return keras.ops.convert_to_tensor(array)
    if hasattr(value, "__array__"):
        if isinstance(value, tf.RaggedTensor) or getattr(value, "dtype", None) == tf.string:
            return value
        if isinstance(value, np.ndarray) and value.dtype.type is np.str_:
            return tf.convert_to_tensor(value)
        return keras.ops.convert_to_tensor(value)
    return value
