"""`same_batch_size`, `same_row_lengths`: inputs packed together, checked to pair up row by row."""

from xlnet_tf.tensorflow_required import tensorflow as tf


def _rows(value):
    """Rows of a dense or ragged tensor: an int, when the shape says it, else an int32 scalar tensor."""
    if isinstance(value, tf.RaggedTensor):
        return value.nrows(out_type=tf.int32)
    if not isinstance(value, tf.Tensor):
        return len(value)  # a list or a NumPy array
    static = value.shape[0] if value.shape.rank else None
    return int(static) if static is not None else tf.shape(value, out_type=tf.int32)[0]


def _as_int(size):
    """`size` as a Python int when it is known now (static, or an eager tensor), else None."""
    if isinstance(size, int):
        return size
    if tf.executing_eagerly() or hasattr(size, "numpy"):
        return int(size.numpy())
    value = tf.get_static_value(size)
    return None if value is None else int(value)


def same_batch_size(owner, inputs):
    """`inputs` unchanged, once they are checked to have the same number of rows.

    Inputs a preprocessor packs together (a text and its pair, a context and its
    choices, words and their labels) must have one row per example each: with
    2 and 1 rows the packer would broadcast or misalign them silently. Sizes
    known when the call is made (eager tensors, static shapes) are compared in
    Python and raise a `ValueError`; otherwise (a `tf.data` map, a
    `tf.function`, a SavedModel) an `Assert` in the graph gates every returned
    tensor, so nothing is packed before the check passed, and a mismatch is an
    `InvalidArgumentError`. Both messages name the inputs and their sizes.

    Args:
        owner: who checks, for the message (e.g. `"XLNetClassifierPreprocessor"`).
        inputs: a dict, input name -> dense or ragged tensor `[B, ...]`, in the
            order of the message (the first is the reference).

    Returns:
        A dict with the same keys and values (gated by the check in a graph).

    Raises:
        ValueError: the sizes are known and differ.

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.preprocessing.batch_size_check import same_batch_size
    >>> same_batch_size("demo", {"text_a": tf.constant(["a", "b"]), "text_b": tf.constant(["c"])})
    Traceback (most recent call last):
    ...
    ValueError: demo: text_a and text_b must have the same batch size; got 2 and 1 rows.
    """
    def check(first, first_size, name, size):
        message = f"{owner}: {first} and {name} must have the same batch size; got"
        known = _as_int(first_size), _as_int(size)
        if None not in known:
            if known[0] != known[1]:
                raise ValueError(f"{message} {known[0]} and {known[1]} rows.")
            return None
        return tf.debugging.Assert(tf.equal(first_size, size), [message, first_size, "and", size, "rows"])

    return _each_against_the_first(inputs, _rows, check)


def same_row_lengths(owner, inputs):
    """`inputs` unchanged, once they have the same batch size and the same length in every row.

    What `same_batch_size` is for rows, this is for the items of each row:
    words and their labels must pair up one to one, or labels land on the
    wrong words of the batch.

    Args:
        owner: who checks, for the message.
        inputs: a dict, input name -> ragged (or dense) tensor `[B, None]`.

    Returns:
        A dict with the same keys and values (gated by the check in a graph).

    Raises:
        ValueError: the lengths are known and differ (the message names the first such row).

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.preprocessing.batch_size_check import same_row_lengths
    >>> same_row_lengths("demo", {"words": tf.ragged.constant([["a", "b"], ["c"]]),
    ...                           "labels": tf.ragged.constant([[0], [1, 2]])})
    Traceback (most recent call last):
    ...
    ValueError: demo: words and labels must have the same length in every row; row 0 has 2 and 1.
    """
    def check(first, first_lengths, name, lengths):
        message = f"{owner}: {first} and {name} must have the same length in every row;"
        if tf.executing_eagerly():
            differ = (first_lengths != lengths).numpy().nonzero()[0]
            if len(differ):
                row = int(differ[0])
                raise ValueError(f"{message} row {row} has {int(first_lengths[row])} and {int(lengths[row])}.")
            return None
        return tf.debugging.Assert(tf.reduce_all(tf.equal(first_lengths, lengths)),
                                   [message, "row lengths", first_lengths, "and", lengths])

    return _each_against_the_first(same_batch_size(owner, inputs), _row_lengths, check)


def _each_against_the_first(inputs, measure, check):
    """`inputs` gated by `check(first name, its measure, name, measure)` of every other input.

    `check` raises at once (sizes known) or returns an `Assert` op, or None when nothing is left to check.
    """
    names = list(inputs)
    measures = {name: measure(value) for name, value in inputs.items()}
    checks = [check(names[0], measures[names[0]], name, measures[name]) for name in names[1:]]
    return _gated(inputs, [c for c in checks if c is not None])


def _row_lengths(value):
    if isinstance(value, tf.RaggedTensor):
        return tf.cast(value.row_lengths(), tf.int32)
    value = tf.convert_to_tensor(value)
    return tf.fill(tf.shape(value, out_type=tf.int32)[:1], tf.shape(value, out_type=tf.int32)[1])


def _gated(inputs, checks):
    """`inputs` as a dict; in a graph, each value behind `checks` (control dependencies)."""
    if not checks:
        return dict(inputs)
    with tf.control_dependencies(checks):
        return {name: tf.nest.map_structure(tf.identity, value, expand_composites=True)
                for name, value in inputs.items()}
