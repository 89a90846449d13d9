"""keras-hub's top-k sampler drawing with `seeded_categorical`."""

from keras import ops
from keras_hub.samplers import TopKSampler

from xlnet_tf.samplers.seeded_categorical import seeded_categorical


class SeededTopKSampler(TopKSampler):
    """`keras_hub.samplers.TopKSampler` whose seed gives the same tokens with and without XLA.

    The k most probable tokens are kept as keras-hub keeps them, in order of
    probability; the draw among them is `seeded_categorical`'s. `XLNetCausalLM` uses it for `"top_k"` and
    for any `keras_hub.samplers.TopKSampler` it is given.

    Args:
        k: int, the number of tokens kept.
        seed: int or None.
        **kwargs: `temperature`.

    Example:
    >>> import numpy as np
    >>> sampler = SeededTopKSampler(k=2, seed=1)
    >>> int(sampler.get_next_token(np.array([[0.1, 0.5, 0.4]], "float32"))[0]) in (1, 2)
    True
    """

    def get_next_token(self, probabilities):
        # Sorted: the unsorted order of the k best differs between the CPU kernel and XLA, which
        # would give each drawn uniform another token.
        top_k_pred, top_k_indices = ops.top_k(probabilities, k=self.k, sorted=True)  # [B, k]
        sample_indices = seeded_categorical(ops.log(top_k_pred), self.seed_generator.next())  # [B, 1]
        return ops.squeeze(ops.take_along_axis(top_k_indices, sample_indices, axis=-1), axis=-1)  # [B]
