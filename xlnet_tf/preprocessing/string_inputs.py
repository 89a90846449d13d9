"""What a model's inputs hold: `contains_string_data` (raw text, which needs a preprocessor), and for the
messages that refuse an input, `describe_input` (a short description of a value) and `dtype_name`."""

import keras
import numpy as np


def contains_string_data(inputs):
    """Whether any leaf of a nested structure (dict, tuple, list) is text.

    Text is a Python `str`/`bytes`, a numpy array of strings (including an object
    array holding strings) or a tensor with a string dtype. Task models call this
    to refuse raw text when they have no preprocessor, with a message saying how
    to attach one.

    Args:
        inputs: any nest of Python values, numpy arrays and tensors.

    Returns:
        True when some leaf is text.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf.preprocessing.string_inputs import contains_string_data
    >>> contains_string_data({"text": ["a quiet river"]})
    True
    >>> contains_string_data({"token_ids": np.zeros((1, 4), "int32")})
    False
    """
    for leaf in keras.tree.flatten(inputs):
        if isinstance(leaf, (str, bytes)):
            return True
        if isinstance(leaf, np.ndarray):
            if leaf.dtype.kind in ("U", "S"):
                return True
            if leaf.dtype.kind == "O" and any(isinstance(item, (str, bytes)) for item in leaf.flat):
                return True
            continue
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and "string" in str(dtype).lower():
            return True
    return False


def describe_input(value):
    """A short description of `value` (its kind, size, dtype and shape, never its contents).

    Messages that refuse an input say what they got with it: a list's length and
    the kind of its first item, a dict's keys, an array's or a tensor's dtype and shape.

    Args:
        value: any Python value, numpy array, tensor or tensor spec.

    Returns:
        A string such as `"a list of 2 str"` or `"an int64 array of shape (2, 6)"`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf.preprocessing.string_inputs import describe_input
    >>> describe_input(["New York", "Paris"])
    'a list of 2 str'
    >>> describe_input({"token_ids": np.zeros((2, 6), "int64")})
    "a dict with keys ['token_ids']"
    >>> describe_input(np.zeros((2, 6), "int64"))
    'an int64 array of shape (2, 6)'
    """
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value, key=str)}"
    if isinstance(value, (str, bytes)):
        return f"a single {type(value).__name__} {value[:40]!r}"
    if isinstance(value, (list, tuple)):
        kind = type(value).__name__
        if not value:
            return f"an empty {kind}"
        return f"a {kind} of {len(value)} {type(value[0]).__name__}"
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is None or shape is None:
        return _with_article(type(value).__name__)
    rank = shape.rank if hasattr(shape, "rank") else len(shape)
    shape_text = "unknown shape" if rank is None else f"shape {tuple(shape)}"
    kind = "array" if isinstance(value, np.ndarray) else "tensor"
    kind = "ragged tensor" if "Ragged" in type(value).__name__ else kind
    return _with_article(f"{dtype_name(dtype)} {kind} of {shape_text}")


def _with_article(words):
    return ("an " if words[0] in "aeiou" else "a ") + words


def dtype_name(dtype):
    """The name of a numpy, TensorFlow or Keras dtype: `"int32"`, `"string"` (numpy's text kinds too), `"object"`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf.preprocessing.string_inputs import dtype_name
    >>> dtype_name(np.array(["a"]).dtype), dtype_name(np.dtype("int64"))
    ('string', 'int64')
    """
    kind = getattr(dtype, "kind", None)
    if kind in ("U", "S") or "string" in str(dtype).lower():
        return "string"
    if kind == "O":
        return "object"
    return keras.backend.standardize_dtype(dtype)
