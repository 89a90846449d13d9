"""`check_token_inputs`: in-graph validation of the ids a serving signature receives."""

import tensorflow as tf

# The packer's segment ids are A 0, B 1, <cls> 2 and padding 4 (the original's SEG_ID_* range): padding is the largest.
from xlnet_tf.preprocessing.xlnet_packer import SEGMENT_PAD

INPUT_ORDER = ("token_ids", "segment_ids", "padding_mask")


def _shape_text(shape):
    return "[" + ", ".join("batch" if d is None else str(d) for d in shape) + "]"


def _assert(condition, *data):
    # `tf.Assert` on a condition computed from runtime shapes: unlike the
    # `tf.debugging.assert_*` helpers it is never resolved at trace time from
    # the signature's static shape, which a serving request need not honour.
    return tf.Assert(condition, list(data), summarize=8)


def check_token_inputs(features, *, shape, vocabulary_size=None):
    """Returns `features` gated by assertions on their shapes and values.

    A SavedModel signature does not enforce its input shapes when TensorFlow
    Serving (or `loaded.signatures[...]`) feeds it, and an id outside the
    embedding table is either read as another row (negative ids) or, on GPU,
    silently gives zeros. These checks run before the model, in three stages
    (each gated on the previous one, so a later check never fails on a shape
    the earlier one rejects):

    1. every input has the rank of `shape` and `token_ids` its static sizes;
    2. `segment_ids` and `padding_mask` have the shape of `token_ids`;
    3. `token_ids` in `[0, vocabulary_size)`, `segment_ids` in `[0, 4]`,
       `padding_mask` in `{0, 1}`.

    A failure is an `InvalidArgumentError` (TF Serving: `INVALID_ARGUMENT`)
    whose message names the input, the expectation and what was received.
    Only core ops are used (`Assert` has a host kernel, so the checks also run
    when the model is placed on a GPU or TPU host).

    Args:
        features: dict with int `token_ids`, `segment_ids`, `padding_mask`
            (keys that are absent are not checked).
        shape: the expected shape, `None` for dynamic axes, e.g. `[None, 128]`.
        vocabulary_size: int, the size of the embedding table; None skips the
            upper bound of `token_ids`.

    Returns:
        A dict with the same keys; each tensor only becomes available after
        every check passed.

    Example:

    ```python
    from xlnet_tf.serving.token_input_checks import check_token_inputs
    features = check_token_inputs(features, shape=[None, 128], vocabulary_size=32000)
    ```
    """
    shape = list(shape)
    names = [k for k in INPUT_ORDER if k in features]
    tensors = {k: features[k] for k in names}
    stage_1 = _rank_and_length_checks(tensors, shape)
    with tf.control_dependencies(stage_1):
        stage_2 = _same_shape_checks(tensors)
    with tf.control_dependencies(stage_1 + stage_2):
        stage_3 = [_value_check(name, tensors[name], vocabulary_size) for name in names]
    with tf.control_dependencies(stage_1 + stage_2 + stage_3):
        return {k: tf.identity(v) for k, v in features.items()}


def _rank_and_length_checks(tensors, shape):
    """Stage 1: every input of the rank of `shape`, and `token_ids` of its static sizes."""
    expected = _shape_text(shape)
    checks = []
    for name, tensor in tensors.items():
        actual = tf.shape(tensor)  # [rank]
        # Counted from the runtime shape's values: `tf.size` or `tf.rank` would be
        # folded to the signature's static rank, which a request need not have.
        rank = tf.reduce_sum(tf.cast(actual >= 0, tf.int32))
        rank_ok = tf.equal(rank, len(shape))
        checks.append(_assert(rank_ok, f"{name} must have rank {len(shape)}, shape {expected}; got shape",
                              actual))
    static = [(axis, size) for axis, size in enumerate(shape) if size is not None]
    if static and "token_ids" in tensors:
        # Gated on the rank checks: indexing the shape of a lower-rank input would fail first.
        with tf.control_dependencies(checks):
            actual = tf.shape(tensors["token_ids"])  # [rank]
            sizes_ok = tf.reduce_all([tf.equal(actual[axis], size) for axis, size in static])
            checks.append(_assert(
                sizes_ok, f"token_ids must have shape {expected} (the exported sequence length); got shape",
                actual))
    return checks


def _same_shape_checks(tensors):
    """Stage 2: every input of the shape of the first one (`token_ids`)."""
    names = list(tensors)
    reference = tf.shape(tensors[names[0]])  # [rank]
    checks = []
    for name in names[1:]:
        actual = tf.shape(tensors[name])  # [rank]
        checks.append(_assert(
            tf.reduce_all(tf.equal(actual, reference)),
            f"{name} must have the shape of {names[0]}", reference, "; got shape", actual))
    return checks


def _value_check(name, tensor, vocabulary_size):
    """Stage 3: the values of one input in its range; the message lists the offending values."""
    values = tf.reshape(tf.cast(tensor, tf.int64), [-1])  # [N]
    low, high = 0, {"token_ids": vocabulary_size, "segment_ids": SEGMENT_PAD + 1, "padding_mask": 2}[name]
    in_range = values >= low
    if high is not None:
        in_range = tf.logical_and(in_range, values < high)
    allowed = {"token_ids": f"in [0, {vocabulary_size}) (the vocabulary size)"
               if vocabulary_size is not None else "non-negative",
               "segment_ids": f"in [0, {SEGMENT_PAD}]",
               "padding_mask": "0 or 1"}[name]
    # The offending values themselves, not the whole tensor, go into the message.
    bad = tf.boolean_mask(values, tf.logical_not(in_range))  # [K]
    return _assert(tf.reduce_all(in_range), f"{name} values must be {allowed}; got", bad)
