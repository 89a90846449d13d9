"""`seeded_sampler`: a sampler name or object, with keras-hub's random samplers swapped for the seeded ones."""

import keras_hub

from xlnet_tf.samplers.seeded_random_sampler import SeededRandomSampler
from xlnet_tf.samplers.seeded_top_k_sampler import SeededTopKSampler
from xlnet_tf.samplers.seeded_top_p_sampler import SeededTopPSampler

# keras-hub's sampler -> ours, by exact class (a user's own subclass keeps its draw).
SEEDED = {keras_hub.samplers.TopKSampler: SeededTopKSampler,
          keras_hub.samplers.TopPSampler: SeededTopPSampler,
          keras_hub.samplers.RandomSampler: SeededRandomSampler}
# keras-hub's sampler names.
SAMPLER_NAMES = ("greedy", "beam", "contrastive", "random", "top_k", "top_p")


def seeded_sampler(identifier):
    """keras-hub's `samplers.get(identifier)`, its top-k, top-p and random samplers drawing with `seeded_categorical`.

    A keras-hub sampler object is replaced by ours with its config and its very
    seed generator, so its state carries on as it would have (the same object
    gives new tokens on each call, as in keras-hub); other samplers (greedy,
    beam, contrastive, a user's own) are returned as they are.

    Args:
        identifier: a sampler name (`"top_k"`, `"top_p"`, `"random"`,
            `"greedy"`, `"beam"`, ...), its config dict, or a sampler.

    Returns:
        A `keras_hub.samplers.Sampler`.

    Raises:
        ValueError: `identifier` names no sampler (an unknown name, a class
            rather than an instance, ...).

    Example:
    >>> type(seeded_sampler("top_k")).__name__
    'SeededTopKSampler'
    >>> type(seeded_sampler("greedy")).__name__
    'GreedySampler'
    """
    try:
        sampler = keras_hub.samplers.get(identifier)
    except (KeyError, ValueError) as error:
        raise ValueError(f"{identifier!r} is not a sampler: {error}") from None
    if not isinstance(sampler, keras_hub.samplers.Sampler):
        raise ValueError(f"{identifier!r} is not a sampler: pass a keras_hub.samplers.Sampler, its config, or one of "
                         f"the names {', '.join(SAMPLER_NAMES)}.")
    seeded = SEEDED.get(type(sampler))
    if seeded is None:
        return sampler
    replacement = seeded.from_config(sampler.get_config())
    # Sampler.__setattr__ lists every SeedGenerator set on it: keep only the shared one.
    replacement._seed_generators = []
    replacement.seed_generator = sampler.seed_generator
    return replacement
