"""keras-hub's top-p (nucleus) sampler drawing with `seeded_categorical`."""

from keras import ops
from keras_hub.samplers import TopPSampler

from xlnet_tf.samplers.seeded_categorical import seeded_categorical


class SeededTopPSampler(TopPSampler):
    """`keras_hub.samplers.TopPSampler` whose seed gives the same tokens with and without XLA.

    The nucleus (the most probable tokens up to probability `p`, the one
    crossing `p` included, among the `k` best when `k` is set) is kept as
    keras-hub keeps it; the draw in it is `seeded_categorical`'s.
    `XLNetCausalLM` uses it for `"top_p"` and for any
    `keras_hub.samplers.TopPSampler` it is given.

    Args:
        p: float, the nucleus' probability.
        k: int or None.
        seed: int or None.
        **kwargs: `temperature`.

    Example:
    >>> import numpy as np
    >>> sampler = SeededTopPSampler(p=0.5, seed=1)
    >>> int(sampler.get_next_token(np.array([[0.1, 0.7, 0.2]], "float32"))[0])
    1
    """

    def get_next_token(self, probabilities):
        cutoff = ops.shape(probabilities)[1] if self.k is None else self.k
        sorted_preds, sorted_indices = ops.top_k(probabilities, k=cutoff, sorted=True)  # [B, cutoff]
        keep = ops.cumsum(sorted_preds, axis=-1) <= self.p
        # The token that crosses p is kept too.
        keep = ops.concatenate([ops.ones_like(keep[:, :1]), keep[:, :-1]], axis=-1)
        kept = ops.where(keep, sorted_preds, ops.zeros_like(sorted_preds))
        sample = seeded_categorical(ops.log(kept), self.seed_generator.next())  # [B, 1]
        return ops.squeeze(ops.take_along_axis(sorted_indices, sample, axis=-1), axis=-1)  # [B]
