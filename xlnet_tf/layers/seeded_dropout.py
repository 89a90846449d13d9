"""Dropout whose mask is a pure function of an explicit seed, for rematerialized blocks.

A rematerialized block runs its forward pass twice: once in the forward step
and again in the backward step to rebuild activations. Keras' `Dropout` draws
a new seed from a stateful generator on every call, so the second run would
use different masks and the gradient would belong to a different network.
With an explicit seed both runs draw the same masks.
"""

import tensorflow as tf


def apply_dropout(layer, inputs, training, seed=None, site=0):
    """`layer(inputs, training)`, or the same dropout drawn from `fold_in(seed, site)`.

    Args:
        layer: a `keras.layers.Dropout` (its `rate` is used).
        inputs: the tensor to drop from.
        training: Python bool; nothing is dropped outside training.
        seed: None (use the layer's own generator) or an int `[2]` stateless seed.
        site: a distinct small integer per dropout call site sharing `seed`.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dropout(0.5)
    >>> x = np.ones((2, 8), "float32")
    >>> seed = tf.constant([1, 2], tf.int64)
    >>> a = apply_dropout(layer, x, True, seed, site=3)
    >>> b = apply_dropout(layer, x, True, seed, site=3)
    >>> bool(tf.reduce_all(a == b))
    True
    """
    if seed is None:
        return layer(inputs, training=training)
    if not training or layer.rate == 0:
        return inputs
    site_seed = tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), site)  # [2]
    return tf.nn.experimental.stateless_dropout(inputs, rate=layer.rate, seed=site_seed)
