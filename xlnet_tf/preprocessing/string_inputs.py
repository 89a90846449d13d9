"""`contains_string_data`: whether a model's inputs hold raw text (so they need a preprocessor)."""

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
