"""Dropout whose mask is a pure function of an explicit seed: exact resume and rematerialization.

Keras' `Dropout` draws a new seed from a stateful `SeedGenerator` on every
call. That state is not part of the weights, so a run restored from a backup
(weights, optimizer state, step counter) draws other masks than the
uninterrupted run, and a rematerialized block, whose forward pass runs again in
the backward step, would drop other units the second time. Here every mask of
a training step is drawn statelessly from one `[2]` seed folded from the run
seed, the micro-batch counter and the replica id (`step_dropout_seed`), so the
same step on the same replica always drops the same units, also after a resume.
Every fold is a tensor op on device: it runs inside XLA, a jitted step, a
`steps_per_execution` loop and every replica of a strategy without a host
round trip.

The random bits come from `seeded_random` on every Keras backend
(TensorFlow's Philox, `jax.random`, an integer hash in PyTorch): the same seed
gives the same mask on one backend; the masks differ between backends. The
step comes from the optimizer's counter, or from `traced_step` where the
forward pass cannot read that counter (JAX's jitted train step).
"""

import contextlib
import random
import threading

import keras
from keras import ops

from xlnet_tf.layers import seeded_random

# Sub-seeds of one step seed: the backbone's and the task head's dropouts.
BACKBONE_SEED, HEAD_SEED = 0, 1


def _on_tensorflow():
    return keras.config.backend() == "tensorflow"


def apply_dropout(layer, inputs, training, seed=None, site=0):
    """`layer(inputs, training)`, or the same dropout drawn from `fold_in(seed, site)`.

    Args:
        layer: a `keras.layers.Dropout` (its `rate` is used).
        inputs: the tensor to drop from.
        training: Python bool; nothing is dropped outside training.
        seed: None (use the layer's own generator) or an int `[2]` stateless seed.
        site: a distinct small integer per dropout call site sharing `seed`.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dropout(0.5)
    >>> x = np.ones((2, 8), "float32")
    >>> a = apply_dropout(layer, x, True, [1, 2], site=3)
    >>> b = apply_dropout(layer, x, True, [1, 2], site=3)
    >>> bool(np.all(keras.ops.convert_to_numpy(a) == keras.ops.convert_to_numpy(b)))
    True
    """
    dropped, scale = apply_unscaled_dropout(layer, inputs, training, seed, site)
    if scale == 1.0:
        return dropped
    return dropped * ops.cast(scale, dropped.dtype)


def apply_unscaled_dropout(layer, inputs, training, seed=None, site=0):
    """`apply_dropout` leaving the kept units unscaled: `(dropped, scale)`.

    Dropout's `1 / (1 - rate)` is a full pass over its input (and another in the
    backward step). Where the dropped tensor feeds a linear map to a smaller
    tensor (attention probabilities `[B, N, Q, K]` times values `[B, N, K, D]`),
    the caller multiplies that smaller result by `scale` instead: the same
    output to rounding, the same mask.

    Args:
        layer, inputs, training, seed, site: as `apply_dropout`.

    Returns:
        `(dropped, scale)`: `dropped * scale` equals `apply_dropout(...)`; `scale`
        is a Python float, 1.0 where nothing is dropped or where Keras' own
        layer (seed None) already scaled.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dropout(0.5)
    >>> x = np.ones((2, 8), "float32")
    >>> dropped, scale = apply_unscaled_dropout(layer, x, True, [1, 2])
    >>> scale, sorted(set(keras.ops.convert_to_numpy(dropped).ravel().tolist()))
    (2.0, [0.0, 1.0])
    """
    if seed is None:
        return layer(inputs, training=training), 1.0
    keep, scale = dropout_keep_mask(layer, inputs, training, seed, site)
    if keep is None:
        return inputs, 1.0
    return apply_keep_mask(keep, inputs), scale


def apply_stacked_dropout(layer, inputs, lengths, training, seed=None, sites=(0,)):
    """`apply_dropout` of streams stacked along axis 1, each part with its own site's mask.

    XLNet's content and query streams share every position-wise weight. Run as
    one `[B, L + P, ...]` tensor, they take one matmul per kernel instead of
    two: the kernel is cast once under mixed precision, its two gradients are
    not summed, and the small query-stream matmul does not run alone. Each part
    is dropped exactly as `apply_dropout(layer, part, training, seed, site)`
    would drop it, so stacking changes no mask.

    Args:
        layer: a `keras.layers.Dropout`.
        inputs: `[B, S_1 + S_2 + ..., ...]`, the parts stacked along axis 1.
        lengths: the parts' lengths S_i along axis 1 (ints; on TensorFlow also
            scalar tensors).
        training: Python bool.
        seed: None (one draw of the layer's own generator over all of `inputs`)
            or an int `[2]` stateless seed.
        sites: one dropout site per part.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dropout(0.5)
    >>> content, query = np.ones((2, 3, 8), "float32"), np.ones((2, 1, 8), "float32")
    >>> stacked = apply_stacked_dropout(layer, np.concatenate([content, query], 1), [3, 1], True,
    ...                                 [1, 2], sites=(4, 6))
    >>> alone = apply_dropout(layer, query, True, [1, 2], site=6)
    >>> bool(np.all(keras.ops.convert_to_numpy(stacked)[:, 3:] == keras.ops.convert_to_numpy(alone)))
    True
    """
    if len(lengths) != len(sites):
        raise ValueError(f"apply_stacked_dropout: {len(lengths)} lengths for {len(sites)} sites.")
    if seed is None or len(sites) == 1:
        return apply_dropout(layer, inputs, training, seed, sites[0])
    if not training or layer.rate == 0:
        return inputs
    keeps = []
    if _on_tensorflow():
        import tensorflow as tf

        # tf.shape: the lengths and the batch may be known only when the graph runs.
        shape = tf.shape(inputs)
        for length, site in zip(lengths, sites):
            # A Python length keeps the mask's static shape (XLA and TPUs need it).
            length = [length] if isinstance(length, int) else tf.reshape(tf.cast(length, shape.dtype), [1])
            part_shape = tf.concat([shape[:1], length, shape[2:]], axis=0)
            keeps.append(_keep_mask_of_shape(part_shape, inputs.shape[-1], layer.rate, sub_seed(seed, site)))
    else:
        shape = tuple(inputs.shape)
        for length, site in zip(lengths, sites):
            part_shape = (shape[0], int(length)) + shape[2:]
            keeps.append(_keep_mask_of_shape(part_shape, shape[-1], layer.rate, sub_seed(seed, site)))
    keep = ops.concatenate(keeps, axis=1)  # [B, S_1 + S_2 + ..., ...]
    return apply_keep_mask(keep, inputs) * ops.cast(1.0 / (1.0 - layer.rate), inputs.dtype)


def apply_keep_mask(keep, inputs):
    """`inputs` where `keep`, zero elsewhere (no scaling): how every seeded mask is applied.

    Args:
        keep: bool, broadcastable to `inputs`.
        inputs: the tensor to drop from.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> import keras
    >>> keras.ops.convert_to_numpy(apply_keep_mask(keras.ops.array([True, False]),
    ...                                            keras.ops.array([3.0, 4.0]))).tolist()
    [3.0, 0.0]
    """
    inputs = ops.convert_to_tensor(inputs)
    # A scalar zero: a zeros_like would be one more full pass.
    return ops.where(keep, inputs, ops.zeros((), inputs.dtype))


def dropout_keep_mask(layer, inputs, training, seed, site=0):
    """The units `apply_unscaled_dropout` keeps, for callers that apply the mask themselves.

    Args:
        layer: a `keras.layers.Dropout` (its `rate` is used).
        inputs: the tensor the mask is for (only its shape is read).
        training: Python bool.
        seed: an int `[2]` stateless seed (not None).
        site: as `apply_dropout`.

    Returns:
        `(keep, scale)`: a bool tensor shaped like `inputs` and `1 / (1 - rate)`,
        or `(None, 1.0)` where nothing is dropped (not training, or rate 0).

    Example:
    >>> import keras
    >>> keep, scale = dropout_keep_mask(keras.layers.Dropout(0.5), keras.ops.zeros((2, 8)), True, [1, 2])
    >>> keras.backend.standardize_dtype(keep.dtype), scale
    ('bool', 2.0)
    """
    if not training or layer.rate == 0:
        return None, 1.0
    return stateless_keep_mask(inputs, layer.rate, sub_seed(seed, site)), 1.0 / (1.0 - layer.rate)


def stateless_keep_mask(inputs, rate, seed):
    """The units a seeded dropout keeps: a bool tensor shaped like `inputs`.

    `tf.nn.experimental.stateless_dropout` draws float uniforms with the
    `auto_select` algorithm, which XLA on CPU expands to a generator many times
    slower than TensorFlow's own kernel, making the XLA step the slow one. Here
    the mask compares raw random bits, 16 per unit (each 32-bit draw serves two
    units), with an integer threshold: no float conversion, half the
    generator's work, the same mask with and without XLA (Philox is
    counter-based; `auto_select` stays on TPUs, whose native generator is the
    fast one there). JAX and PyTorch draw their own counter-based bits
    (`seeded_random`) and compare them the same way.

    Args:
        inputs: the tensor the mask is for (only its shape is read).
        rate: Python float in `[0, 1)`, the probability of dropping a unit.
        seed: int `[2]` stateless seed.

    Returns:
        bool, shaped like `inputs`: True where the unit is kept.

    Example:
    >>> import keras
    >>> keep = stateless_keep_mask(keras.ops.zeros((4, 1000)), 0.25, [3, 4])
    >>> abs(float(keras.ops.mean(keras.ops.cast(keep, "float32"))) - 0.75) < 0.02
    True
    """
    if _on_tensorflow():
        import tensorflow as tf

        return _keep_mask_of_shape(tf.shape(inputs), inputs.shape[-1], rate, seed)
    shape = tuple(inputs.shape)
    return _keep_mask_of_shape(shape, shape[-1], rate, seed)


def _keep_mask_of_shape(shape, static_last, rate, seed):
    """`stateless_keep_mask` for a tensor of `shape` (an int vector or tuple); `static_last` its last size or None."""
    # 16 random bits per unit: each 32-bit draw decides two units, half the generator's
    # work on every backend. On CPU, XLA's Philox fused into the select cost more than TensorFlow's
    # kernel (the XLA step's largest excess); split draws cost less than the kernel's.
    threshold = min(int(round(rate * 2.0 ** 16)), 2 ** 16 - 1)
    if _on_tensorflow():
        import tensorflow as tf

        last = shape[-1]
        half_shape = tf.concat([shape[:-1], [(last + 1) // 2]], axis=0)
        bits = stateless_random_bits(half_shape, seed)  # [..., ceil(last / 2)]
        # The low half decides the first ceil(last / 2) units, the high half the rest. The
        # high half is compared in place (`bits >= threshold * 2**16` is `bits >> 16 >= threshold`),
        # and the halves are joined as booleans: a quarter of the bytes of joining the bits.
        keep = tf.concat([tf.bitwise.bitwise_and(bits, 0xFFFF) >= tf.constant(threshold, tf.uint32),
                          bits >= tf.constant(threshold << 16, tf.uint32)],
                         axis=-1)  # [..., 2 * ceil(last / 2)]
        if static_last is None or static_last % 2:
            keep = keep[..., :last]  # shaped like inputs
        return keep
    last = int(shape[-1])
    words = seeded_random.random_words(tuple(shape[:-1]) + ((last + 1) // 2,), seed)  # [..., ceil(last / 2)]
    # Thresholds in the words' dtype: a Python int past 2**31 overflows JAX's weak int32.
    low_threshold, high_threshold = (ops.convert_to_tensor(value, keras.backend.standardize_dtype(words.dtype))
                                     for value in (threshold, threshold << 16))
    keep = ops.concatenate([(words & 0xFFFF) >= low_threshold, words >= high_threshold],
                           axis=-1)  # [..., 2 * ceil(last / 2)]
    if last % 2:
        keep = keep[..., :last]  # shaped like inputs
    return keep


def stateless_random_bits(shape, seed):
    """uint32 random bits, a pure function of `seed`: `seeded_random.random_bits` on every backend.

    On TensorFlow these are Philox bits, the same with and without XLA
    (`auto_select` on TPUs only); on JAX `jax.random` bits (jit-safe); on
    PyTorch a keyed integer hash. Seeded dropout masks and the generation
    samplers' draws both come from here.

    Args:
        shape: the output shape (a list or tuple; on TensorFlow also an int vector).
        seed: int `[2]` stateless seed.

    Returns:
        uint32, of `shape`.

    Example:
    >>> import keras
    >>> a = stateless_random_bits([3], [1, 2])
    >>> b = stateless_random_bits([3], [1, 2])
    >>> bool(keras.ops.all(keras.ops.equal(keras.ops.cast(a, "int32"), keras.ops.cast(b, "int32"))))
    True
    """
    return seeded_random.random_bits(shape, seed)


def default_run_seed():
    """A run seed fixed by `keras.utils.set_random_seed` (which seeds Python's `random`).

    It is read from a copy of Python's random state, so drawing it does not
    shift any later draw (the initial weights stay what they were).

    Returns:
        A Python int in `[0, 2**31)`.
    """
    generator = random.Random()
    generator.setstate(random.getstate())
    return generator.getrandbits(31)


def micro_batch_counter(optimizer):
    """The optimizer's count of `apply` calls: one per micro-batch, also with gradient accumulation.

    Keras' `optimizer.iterations` counts updates when gradients are
    accumulated; the raw counter still advances on every micro-batch, so each
    micro-batch of an update gets its own masks. A `LossScaleOptimizer` is
    looked through.

    Args:
        optimizer: a Keras optimizer.

    Returns:
        The int counter variable (restored with the optimizer's state).
    """
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    counter = getattr(optimizer, "_iterations", None)
    return optimizer.iterations if counter is None else counter


def micro_batch_counter_value(optimizer, optimizer_variables):
    """`micro_batch_counter(optimizer)`'s value in a stateless train step's optimizer state.

    JAX's train step receives the optimizer's variables as values
    (`state[2]`, in the order of `optimizer.variables`); this picks the
    counter's, a traced scalar there, for `traced_step`.

    Args:
        optimizer: the model's Keras optimizer.
        optimizer_variables: the values of `optimizer.variables`, in order.

    Returns:
        The counter's value (an int scalar).

    Raises:
        ValueError: the counter is not among `optimizer.variables` or the
            lengths differ.
    """
    variables = list(optimizer.variables)
    optimizer_variables = list(optimizer_variables)
    if len(variables) != len(optimizer_variables):
        raise ValueError(f"micro_batch_counter_value: {len(optimizer_variables)} optimizer values for "
                         f"{len(variables)} variables of optimizer {optimizer.name!r}.")
    counter = micro_batch_counter(optimizer)
    for variable, value in zip(variables, optimizer_variables):
        if variable is counter:
            return value
    raise ValueError(f"micro_batch_counter_value: the counter {counter.path!r} is not among the variables "
                     f"of optimizer {optimizer.name!r}.")


_TRACED_STEPS = threading.local()


@contextlib.contextmanager
def traced_step(step):
    """Sets the step that `training_dropout_seed` folds in, for the forward passes inside the block.

    Inside JAX's jitted train step the forward pass cannot read the
    optimizer's counter: optimizer variables are passed to the step as state,
    so the counter variable itself is a trace-time constant there (every step
    would draw the first step's masks), or, in `fit`, holds no value at all. The train step passes the traced
    counter value here instead; `training_dropout_seed` prefers it over
    `micro_batch_counter(optimizer)`. TensorFlow and PyTorch read the counter
    variable itself and need no `traced_step` (it works there too).

    The contract for a JAX `train_step` override: take the counter's value
    from the optimizer state (`micro_batch_counter_value`), the value before
    this step's `apply`, as TensorFlow's forward pass reads it, and run the
    whole forward and backward pass (`super().train_step`) inside the block.
    Nested blocks restore the outer step on exit.

    Args:
        step: an int scalar (a traced value, a tensor or a Python int).

    Example:
    >>> class Model:  # what `training_dropout_seed` reads: the run seed (and an optimizer, unused here)
    ...     dropout_run_seed, optimizer = 7, None
    >>> with traced_step(3):
    ...     seed = training_dropout_seed(Model(), training=True)
    >>> expected = step_dropout_seed(7, 3)
    >>> bool((keras.ops.convert_to_numpy(seed) == keras.ops.convert_to_numpy(expected)).all())
    True

    A JAX train step override (the JAX trainer's `train_step(state, data)`):

        class Task(keras.Model):
            def train_step(self, state, data):
                step = micro_batch_counter_value(self.optimizer, state[2])
                with traced_step(step):
                    return super().train_step(state, data)
    """
    steps = _traced_step_stack()
    steps.append(step)
    try:
        yield step
    finally:
        steps.pop()


def current_traced_step():
    """The innermost `traced_step`'s step, or None outside every `traced_step` block."""
    steps = _traced_step_stack()
    return steps[-1] if steps else None


def _traced_step_stack():
    if not hasattr(_TRACED_STEPS, "steps"):
        _TRACED_STEPS.steps = []
    return _TRACED_STEPS.steps


def step_dropout_seed(run_seed, step):
    """The `[2]` seed of every dropout mask of one training step on this replica.

    Args:
        run_seed: Python int, fixed for the whole run (also across a resume).
        step: int scalar (tensor, variable or traced value), the micro-batch
            counter (`micro_batch_counter`, or the one `traced_step` sets).

    Returns:
        int `[2]` (int64 on TensorFlow): `fold_in(fold_in(run_seed, step), replica id)`;
        replicas get different masks, the same step of a resumed run the same ones.
        The replica id is the `tf.distribute` replica's on TensorFlow, 0 on JAX
        and PyTorch (one program per process; under `keras.distribution` the
        batch is global).

    Example:
    >>> import keras
    >>> a = keras.ops.convert_to_numpy(step_dropout_seed(7, 3))
    >>> b = keras.ops.convert_to_numpy(step_dropout_seed(7, 4))
    >>> bool((a == b).all())
    False
    """
    run_seed = int(run_seed)
    words = [run_seed & 0x7FFFFFFF, (run_seed >> 31) & 0x7FFFFFFF]
    if _on_tensorflow():
        import tensorflow as tf

        # Folded as int64: TensorFlow's fold draws in its data's dtype, and saved runs drew these.
        seed = tf.constant(words, tf.int64)  # [2]
        seed = seeded_random.fold_in(seed, tf.cast(step, tf.int64))
        return seeded_random.fold_in(seed, tf.cast(_replica_id(), tf.int64))
    if isinstance(step, keras.Variable):
        step = _variable_value(step)
    seed = seeded_random.fold_in(words, step)
    # One program per process (under keras.distribution the batch is global): replica 0.
    return seeded_random.fold_in(seed, 0)


def training_dropout_seed(model, training):
    """`step_dropout_seed` of `model`'s current step, or None outside training or before `compile`.

    The step is the innermost `traced_step`'s where one is set (JAX's jitted
    train step), else the optimizer's `micro_batch_counter`. None leaves every
    dropout to its Keras layer (inference is unchanged, and a model called for
    training without an optimizer and outside `traced_step` keeps stateful
    dropout).

    Args:
        model: a model with a `backbone` holding `dropout_run_seed` (or holding
            it itself), compiled unless a `traced_step` is set.
        training: the call's `training` flag.

    Returns:
        int `[2]` or None.
    """
    if not training:
        return None
    step = current_traced_step()
    if step is None:
        optimizer = getattr(model, "optimizer", None)
        if optimizer is None:
            return None
        step = micro_batch_counter(optimizer)
    backbone = getattr(model, "backbone", model)
    return step_dropout_seed(backbone.dropout_run_seed, step)


def sub_seed(seed, index):
    """`fold_in(seed, index)`, None for a None seed (the two users of a step seed draw apart)."""
    if seed is None:
        return None
    return seeded_random.fold_in(seed, index)  # [2]


def _variable_value(variable):
    """A counter variable's value; a clear error where JAX's `fit` holds it outside the variable."""
    try:
        return variable.value
    except TypeError as error:
        # JAX's trainer frees the variables' own values while the state is passed to the step.
        raise RuntimeError(
            f"step_dropout_seed: the counter variable {variable.path!r} holds no value here (inside JAX's "
            "train step the optimizer state is passed to the step); run the forward pass inside "
            "`traced_step(micro_batch_counter_value(optimizer, state[2]))`.") from error


def _replica_id():
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    # Cross-replica context (a call outside `strategy.run`) counts as replica 0.
    return 0 if context is None else context.replica_id_in_sync_group
