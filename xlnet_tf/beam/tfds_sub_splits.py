"""Reading one TFDS split as several even sub-splits, so it spreads over workers (both Beam jobs)."""


def tfds_sub_splits(split, count):
    """`split` as `count` contiguous even sub-splits, in order; `[split]` itself when `count` <= 1.

    Read one after the other, the sub-splits give exactly the examples of
    `split` in the same order (TFDS numbers examples across its files, and
    `tfds.even_splits` cuts that numbering into consecutive pieces), so a job
    that numbers examples can number each sub-split from the sizes of the
    ones before it.

    Args:
        split: a TFDS split spec (`"train"`, `"train[:50%]"`).
        count: how many sub-splits.

    Returns:
        A list of split specs `tfds.load` / `builder.as_dataset` accept.

    Example:
    >>> from xlnet_tf.beam.tfds_sub_splits import tfds_sub_splits
    >>> len(tfds_sub_splits("train", 3))
    3
    >>> tfds_sub_splits("train", 1)
    ['train']
    """
    if count <= 1:
        return [split]
    import tensorflow_datasets as tfds  # import time: it takes seconds; only `--tfds` sources need it

    return list(tfds.even_splits(split, n=count))
