"""`check_token_id_inputs`: the token-id inputs of a model, checked before they reach the embedding.

An id outside the embedding table fails inside the lookup with a bare `InvalidArgumentError`
(or, on a GPU, silently reads zeros), and a negative id is read as another row: the
prediction then comes from a different token. A missing key, a bare array, float ids or
shapes that do not agree fail deep inside the model. This module refuses all of them
up front, with a message that names the input, what it must be and what was given.

Where it runs (each caller picks what its values allow):

- concrete values (numpy arrays, Python lists, eager tensors, JAX/PyTorch arrays): every
  check, the values included, in numpy, raising `TypeError` / `ValueError`;
- symbolic tensors inside a model's traced step (`fit`/`predict`'s compiled function,
  a `tf.function`, a JAX tracer under `jax.jit`, `torch.compile`, `keras.Input`): structure,
  dtypes and the shapes known when tracing only. Assert ops would stop XLA compilation, a
  traced value has nothing to raise on, and the ids were checked where they came from;
- symbolic tensors of a `tf.data` map (`assert_in_graph=True`): the same, plus `Assert`
  ops on the values that gate the returned tensors, as `tf.data` runs on the host CPU.
  A failure is an `InvalidArgumentError` carrying the same text, the offending value
  and its index within the batch.

The rules are those of the serving signature's `check_token_inputs`: `token_ids` in
`[0, vocabulary_size)`, `segment_ids` in `[0, 4]` (the packer's A 0, B 1, `<cls>` 2,
padding 4), `padding_mask` 0 or 1 (or bool), every input with the shape of `token_ids`.
"""

import sys
from collections.abc import Mapping

import keras
import numpy as np

from xlnet_tf.preprocessing.string_inputs import describe_input, dtype_name
from xlnet_tf.formats.finetuning_records import SEGMENT_PAD

# The token-id inputs every XLNet model reads (the backbone's required inputs).
REQUIRED_INPUTS = ("token_ids", "segment_ids", "padding_mask")
# What each input is, said when it is missing.
_MEANINGS = {
    "token_ids": "the ids of the pieces",
    "segment_ids": "0 first text, 1 second text, 2 <cls>, 4 padding",
    "padding_mask": "1 on real tokens, 0 on padding: np.ones_like(token_ids) when nothing is padded",
}


def check_token_id_inputs(inputs, *, vocabulary_size, caller, keys=REQUIRED_INPUTS,
                          shapes=(("batch", "length"),), hint="", assert_in_graph=False, first_row=0):
    """Returns `inputs` once they are a dict of integer ids of agreeing shapes, in range.

    Args:
        inputs: what the model was given: a dict of arrays, tensors or tensor specs
            (a `tf.data` element spec), or anything else (refused).
        vocabulary_size: the size of the embedding table: `token_ids` must be in
            `[0, vocabulary_size)`.
        caller: who checks, first word of every message (e.g. `"XLNetClassifier"`).
        keys: the inputs required; `keys[0]` is the reference of the shapes.
        shapes: the accepted shapes of `keys[0]`, axis names, e.g.
            `(("batch", "length"), ("batch", "segments", "length"))`.
        hint: a sentence added to the structure errors (what else the caller takes,
            how to build the dict).
        assert_in_graph: for symbolic TensorFlow tensors, gate the returned values by
            `Assert` ops on their values (only in graphs that run on the host: `tf.data`).
        first_row: the number of the batch's first row in messages (a caller that
            checks a stream batch by batch numbers rows across batches).

    Returns:
        A dict with the keys of `inputs`; in a graph with `assert_in_graph`, the values of
        `keys` only become available after the checks passed.

    Raises:
        TypeError: `inputs` is not a dict, or an input is not integer (or ragged).
        ValueError: a key is missing, a rank or a shape does not fit, a batch has no
            rows, or a value is out of range (the message names the input, the value,
            its row and column).

    Example:
    >>> ids = np.array([[11, 12, 40]])
    >>> check_token_id_inputs({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids},
    ...                       vocabulary_size=32, caller="demo")
    Traceback (most recent call last):
    ...
    ValueError: demo: token_ids values must be in [0, 32) (the vocabulary size); got 40 at row 0, column 2. ...
    """
    expected = _expected(keys, shapes)
    if not isinstance(inputs, Mapping):
        raise TypeError(f"{caller} takes {expected}; got {describe_input(inputs)}.{hint}")
    missing = [key for key in keys if inputs.get(key) is None]
    if missing:
        meanings = "; ".join(f"{key}: {_MEANINGS[key]}" for key in missing if key in _MEANINGS)
        raise ValueError(f"{caller} takes {expected}; got a dict with keys {sorted(inputs, key=str)}, missing "
                         f"{missing}" + (f" ({meanings})" if meanings else "") + f".{hint}")
    values = {key: _known_values(caller, key, inputs[key]) for key in keys}
    for key in keys:
        _check_dtype(caller, key, inputs[key] if values[key] is None else values[key])
    _check_shapes(caller, keys, {key: _static_shape(inputs[key] if values[key] is None else values[key])
                                 for key in keys}, shapes)
    limits = {key: _limits(key, vocabulary_size) for key in keys}
    if all(value is not None for value in values.values()):
        if values[keys[0]].shape[0] == 0:
            raise ValueError(f"{caller}: {keys[0]} has no rows (shape {values[keys[0]].shape}); "
                             "pass at least one example.")
        for key in keys:
            _check_values_now(caller, key, values[key], *limits[key], first_row=first_row)
        return dict(inputs)
    tf = sys.modules.get("tensorflow")  # Only an imported TensorFlow can hand over its tensors.
    if assert_in_graph and tf is not None and all(isinstance(inputs[key], tf.Tensor) for key in keys):
        return _gated_by_value_checks(caller, inputs, keys, limits)
    return dict(inputs)


def concrete_values(value):
    """The values of `value` as a numpy array when they are known now, else None.

    Known: numpy arrays, lists, eager TensorFlow tensors, JAX arrays outside a
    trace, PyTorch tensors outside `torch.compile`. Not known: `keras.KerasTensor`,
    tensors of a `tf.function` graph, JAX tracers (`jax.jit`, `jax.grad`), PyTorch
    tensors on the `meta` device or inside `torch.compile`. A model checks
    values only where they are known, so one check serves eager calls on every
    backend and costs nothing in a compiled step.

    Args:
        value: an array, a tensor of any backend, or a list.

    Returns:
        A numpy array, or None.

    Example:
    >>> concrete_values(keras.ops.array([1, 2])).tolist()
    [1, 2]
    >>> concrete_values(keras.KerasTensor((2,), "int32")) is None
    True
    """
    if _is_symbolic(value):
        return None
    return np.asarray(keras.ops.convert_to_numpy(value))


def _expected(keys, shapes):
    forms = " or ".join("[" + ", ".join(names) + "]" for names in shapes)
    return f"a dict of {', '.join(keys)}, each int {forms}"


def _limits(key, vocabulary_size):
    """`(low, high exclusive, what the values must be)` of an input."""
    if key == "token_ids":
        return 0, vocabulary_size, f"in [0, {vocabulary_size}) (the vocabulary size)"
    if key == "segment_ids":
        return 0, SEGMENT_PAD + 1, f"in [0, {SEGMENT_PAD}]"
    if key == "padding_mask":
        return 0, 2, "0 or 1"
    return 0, None, "non-negative"


def _is_symbolic(value):
    """Whether `value` has no values yet (a traced or symbolic tensor, or a spec).

    Each framework is looked up in `sys.modules`, never imported: a value can
    only be a framework's tensor once that framework is imported.
    """
    if isinstance(value, keras.KerasTensor):
        return True
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        if isinstance(value, tf.TypeSpec):
            return True
        if isinstance(value, tf.Tensor):
            return tf.is_symbolic_tensor(value)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(value, jax.core.Tracer):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.device.type == "meta" or torch.compiler.is_compiling()
    return False


def _known_values(caller, key, value):
    """The values of `value` as a numpy array when they are known now, else None."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(value, (tf.RaggedTensor, tf.RaggedTensorSpec)):
        raise TypeError(f"{caller}: {key} must be a dense tensor (rows of one length); got "
                        f"{describe_input(value)}. Pad the rows to one length (padding_mask 0 on the padding).")
    if _is_symbolic(value):
        return None
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value)
        except ValueError:
            raise ValueError(f"{caller}: the rows of {key} have different lengths; pad them to one length "
                             "(padding_mask 0 on the padding).") from None
    return np.asarray(keras.ops.convert_to_numpy(value))


def _check_dtype(caller, key, value):
    name = dtype_name(value.dtype)
    if "int" in name or (key == "padding_mask" and name == "bool"):
        return
    allowed = "integers (or bool)" if key == "padding_mask" else "integers"
    fix = " Cast whole-number ids with .astype('int32')." if "float" in name else ""
    raise TypeError(f"{caller}: {key} must hold {allowed}; got {name} values.{fix}")


def _static_shape(value):
    """The shape as a tuple (None for unknown sizes), or None when even the rank is unknown."""
    shape = value.shape
    if getattr(shape, "rank", 0) is None:
        return None
    return tuple(None if d is None else int(d) for d in shape)


def _check_shapes(caller, keys, shapes_now, shapes):
    reference = shapes_now[keys[0]]
    ranks = sorted({len(names) for names in shapes})
    if reference is not None and len(reference) not in ranks:
        forms = " or ".join("[" + ", ".join(names) + "]" for names in shapes)
        raise ValueError(f"{caller}: {keys[0]} must have shape {forms}; got shape {reference}.")
    for key in keys[1:]:
        shape = shapes_now[key]
        if reference is None or shape is None:
            continue
        if len(shape) != len(reference) or any(a is not None and b is not None and a != b
                                                for a, b in zip(shape, reference)):
            raise ValueError(f"{caller}: {key} must have the shape of {keys[0]} {reference}; got shape {shape}.")


def _where(index, first_row=0):
    """`row r, column c` (and the whole index for inputs of rank 3 and more); rows counted from `first_row`."""
    index = (index[0] + first_row,) + tuple(index[1:])
    text = f"row {index[0]}, column {index[-1]}" if len(index) > 1 else f"row {index[0]}"
    return text + (f" (index {list(index)})" if len(index) > 2 else "")


def _check_values_now(caller, key, values, low, high, allowed, first_row=0):
    if values.dtype == bool or values.size == 0:
        return
    bad = values < low
    if high is not None:
        bad |= values >= high
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    more = int(bad.sum()) - 1
    message = (f"{caller}: {key} values must be {allowed}; got {values[index]} at {_where(index, first_row)}"
               + (f", and {more} more out of range" if more else "") + ".")
    if key == "token_ids":
        message += (" Negative ids would be read as other tokens; ids from a larger vocabulary need a model with "
                    "that vocabulary.")
    raise ValueError(message)


def _gated_by_value_checks(caller, inputs, keys, limits):
    """`inputs` with `keys` behind `Assert`s on their shapes and values (a `tf.data` map)."""
    import tensorflow as tf

    checks = []
    reference = tf.shape(inputs[keys[0]])  # [rank]
    for key in keys[1:]:
        if inputs[key].shape.rank is None or inputs[key].shape.rank != inputs[keys[0]].shape.rank:
            continue  # Different static ranks were refused already; unknown ranks are left to the model.
        shape = tf.shape(inputs[key])  # [rank]
        checks.append(tf.debugging.Assert(
            tf.reduce_all(tf.equal(shape, reference)),
            [f"{caller}: {key} must have the shape of {keys[0]}", reference, "; got shape", shape]))
    with tf.control_dependencies(checks):
        for key in keys:
            low, high, allowed = limits[key]
            values = tf.cast(inputs[key], tf.int64)
            bad = values < low
            if high is not None:
                bad = tf.logical_or(bad, values >= high)
            first = tf.where(bad)[:1]  # [1 or 0, rank]: the first offending index
            checks.append(tf.debugging.Assert(
                tf.logical_not(tf.reduce_any(bad)),
                [f"{caller}: {key} values must be {allowed}; got", tf.gather_nd(values, first),
                 "at index (row, ..., column) of the batch", first, "; values out of range:",
                 tf.reduce_sum(tf.cast(bad, tf.int32))], summarize=8))
    with tf.control_dependencies(checks):
        return {key: tf.identity(value) if key in keys else value for key, value in inputs.items()}
