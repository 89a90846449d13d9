"""One categorical draw per row, a pure function of a seed: the same token with and without XLA."""

import tensorflow as tf

from xlnet_tf.layers.seeded_dropout import stateless_random_bits


def seeded_categorical(log_probabilities, seed):
    """Draws one index per row from `softmax(log_probabilities)`, by Gumbel-max over Philox bits.

    keras-hub's samplers draw with `tf.random.stateless_categorical`, whose
    CPU kernel searches the cumulative distribution while its XLA kernel takes
    the Gumbel-max of the seed's uniforms: one seed, two tokens. Here the
    uniforms come from `stateless_random_bits` (the seeded dropout's bits,
    identical with and without XLA) and the draw is their Gumbel-max on every
    path. Only rounding of the logits themselves (eager and XLA kernels may
    differ in the last bit) can still move a draw, at a near-exact tie.

    Args:
        log_probabilities: float `[B, V]`; `-inf` marks tokens never drawn.
        seed: int `[2]` stateless seed.

    Returns:
        int32 `[B, 1]`, each row's drawn index.

    Example:
    >>> logits = tf.math.log(tf.constant([[0.1, 0.0, 0.9]]))
    >>> seed = tf.constant([4, 2], tf.int64)
    >>> eager = seeded_categorical(logits, seed)
    >>> xla = tf.function(seeded_categorical, jit_compile=True)(logits, seed)
    >>> int(eager[0, 0]) == int(xla[0, 0]) and int(eager[0, 0]) != 1
    True
    """
    log_probabilities = tf.cast(log_probabilities, tf.float32)
    bits = stateless_random_bits(tf.shape(log_probabilities), tf.cast(seed, tf.int64))  # [B, V]
    # The top 24 bits as a float32 uniform in (0, 1), exact (24 is float32's mantissa): never 0 or 1.
    uniform = (tf.cast(tf.bitwise.right_shift(bits, 8), tf.float32) + 0.5) * (2.0 ** -24)
    gumbel = -tf.math.log(-tf.math.log(uniform))
    return tf.argmax(log_probabilities + gumbel, axis=-1, output_type=tf.int32)[:, None]  # [B, 1]
