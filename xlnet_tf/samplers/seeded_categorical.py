"""One categorical draw per row, a pure function of a seed: the same token with and without XLA."""

import keras
from keras import ops

from xlnet_tf.layers.seeded_dropout import stateless_random_bits


def seeded_categorical(log_probabilities, seed):
    """Draws one index per row from `softmax(log_probabilities)`, by Gumbel-max over Philox bits.

    keras-hub's samplers draw with `keras.random.categorical`, which on
    TensorFlow is `tf.random.stateless_categorical`: its CPU kernel searches
    the cumulative distribution while its XLA kernel takes the Gumbel-max of
    the seed's uniforms, so one seed gives two tokens. Here the uniforms come
    from `stateless_random_bits` (the seeded dropout's bits, identical with and
    without XLA) and the draw is their Gumbel-max on every path. Each backend
    has its own generator of those bits, so a seed fixes the tokens on one
    backend (in every run, compiled or not), not across backends.
    Only rounding of the logits themselves (eager and XLA kernels may differ in
    the last bit) can still move a draw, at a near-exact tie.

    Args:
        log_probabilities: float `[B, V]`; `-inf` marks tokens never drawn.
        seed: int `[2]` stateless seed (a `keras.random.SeedGenerator`'s `next()`).

    Returns:
        int32 `[B, 1]`, each row's drawn index.

    Example:
    >>> import numpy as np
    >>> logits = np.array([[-2.3, -np.inf, -0.1]], "float32")  # Token 1 is never drawn.
    >>> first = seeded_categorical(logits, np.array([4, 2]))
    >>> again = seeded_categorical(logits, np.array([4, 2]))
    >>> int(first[0, 0]) == int(again[0, 0]) and int(first[0, 0]) != 1
    True
    """
    log_probabilities = ops.cast(log_probabilities, "float32")
    bits = stateless_random_bits(ops.shape(log_probabilities), seed)  # [B, V]
    if keras.config.backend() == "torch":
        # PyTorch's uint32 tensors have no shifts: the same 32-bit words, as int64.
        bits = ops.cast(bits, "int64")
    # The top 24 bits as a float32 uniform in (0, 1), exact (24 is float32's mantissa): never 0 or 1.
    uniform = (ops.cast(ops.right_shift(bits, 8), "float32") + 0.5) * (2.0 ** -24)
    gumbel = -ops.log(-ops.log(uniform))
    return ops.cast(ops.argmax(log_probabilities + gumbel, axis=-1), "int32")[:, None]  # [B, 1]
