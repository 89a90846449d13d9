"""keras-hub's random (categorical) sampler drawing with `seeded_categorical`."""

from keras import ops
from keras_hub.samplers import RandomSampler

from xlnet_tf.samplers.seeded_categorical import seeded_categorical


class SeededRandomSampler(RandomSampler):
    """`keras_hub.samplers.RandomSampler` whose seed gives the same tokens with and without XLA.

    Draws from the whole distribution with `seeded_categorical`.
    `XLNetCausalLM` uses it for `"random"` and for any
    `keras_hub.samplers.RandomSampler` it is given.

    Args:
        seed: int or None.
        **kwargs: `temperature`.

    Example:
    >>> import numpy as np
    >>> sampler = SeededRandomSampler(seed=1)
    >>> int(sampler.get_next_token(np.array([[0.0, 1.0, 0.0]], "float32"))[0])
    1
    """

    def get_next_token(self, probabilities):
        return ops.squeeze(seeded_categorical(ops.log(probabilities), self.seed_generator.next()), axis=-1)  # [B]
