"""Dropout whose mask is a pure function of an explicit seed: exact resume and rematerialization.

Keras' `Dropout` draws a new seed from a stateful `SeedGenerator` on every
call. That state is not part of the weights, so a run restored from a backup
(weights, optimizer state, step counter) draws other masks than the
uninterrupted run, and a rematerialized block, whose forward pass runs again in
the backward step, would drop other units the second time. Here every mask of
a training step is drawn statelessly from one `[2]` seed folded from the run
seed, the optimizer's micro-batch counter and the replica id
(`step_dropout_seed`), so the same step on the same replica always drops the
same units, also after a resume. Every fold is a tensor op on device: it runs
inside XLA, a `steps_per_execution` loop and every replica of a strategy
without a host round trip.
"""

import random

import tensorflow as tf

# Sub-seeds of one step seed: the backbone's and the task head's dropouts.
BACKBONE_SEED, HEAD_SEED = 0, 1


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
    >>> seed = tf.constant([1, 2], tf.int64)
    >>> a = apply_dropout(layer, x, True, seed, site=3)
    >>> b = apply_dropout(layer, x, True, seed, site=3)
    >>> bool(tf.reduce_all(a == b))
    True
    """
    dropped, scale = apply_unscaled_dropout(layer, inputs, training, seed, site)
    if scale == 1.0:
        return dropped
    return dropped * tf.cast(scale, dropped.dtype)


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
    >>> dropped, scale = apply_unscaled_dropout(layer, x, True, tf.constant([1, 2], tf.int64))
    >>> scale, sorted(set(dropped.numpy().ravel().tolist()))
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
        lengths: the parts' lengths S_i along axis 1 (ints or scalar tensors).
        training: Python bool.
        seed: None (one draw of the layer's own generator over all of `inputs`)
            or an int `[2]` stateless seed.
        sites: one dropout site per part.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dropout(0.5)
    >>> seed = tf.constant([1, 2], tf.int64)
    >>> content, query = np.ones((2, 3, 8), "float32"), np.ones((2, 1, 8), "float32")
    >>> stacked = apply_stacked_dropout(layer, np.concatenate([content, query], 1), [3, 1], True,
    ...                                 seed, sites=(4, 6))
    >>> alone = apply_dropout(layer, query, True, seed, site=6)
    >>> bool(tf.reduce_all(stacked[:, 3:] == alone))
    True
    """
    if len(lengths) != len(sites):
        raise ValueError(f"apply_stacked_dropout: {len(lengths)} lengths for {len(sites)} sites.")
    if seed is None or len(sites) == 1:
        return apply_dropout(layer, inputs, training, seed, sites[0])
    if not training or layer.rate == 0:
        return inputs
    shape = tf.shape(inputs)
    keeps = []
    for length, site in zip(lengths, sites):
        # A Python length keeps the mask's static shape (XLA and TPUs need it).
        length = [length] if isinstance(length, int) else tf.reshape(tf.cast(length, shape.dtype), [1])
        part_shape = tf.concat([shape[:1], length, shape[2:]], axis=0)
        keeps.append(_keep_mask_of_shape(part_shape, inputs.shape[-1], layer.rate, sub_seed(seed, site)))
    keep = tf.concat(keeps, axis=1)  # [B, S_1 + S_2 + ..., ...]
    return apply_keep_mask(keep, inputs) * tf.cast(1.0 / (1.0 - layer.rate), inputs.dtype)


def apply_keep_mask(keep, inputs):
    """`inputs` where `keep`, zero elsewhere (no scaling): how every seeded mask is applied.

    Args:
        keep: bool, broadcastable to `inputs`.
        inputs: the tensor to drop from.

    Returns:
        A tensor shaped like `inputs`.

    Example:
    >>> apply_keep_mask(tf.constant([True, False]), tf.constant([3.0, 4.0])).numpy().tolist()
    [3.0, 0.0]
    """
    # A scalar zero: a zeros_like would be one more full pass.
    return tf.where(keep, inputs, tf.zeros([], inputs.dtype))


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
    >>> keep, scale = dropout_keep_mask(keras.layers.Dropout(0.5), tf.zeros((2, 8)), True,
    ...                                 tf.constant([1, 2], tf.int64))
    >>> keep.dtype, scale
    (tf.bool, 2.0)
    """
    if not training or layer.rate == 0:
        return None, 1.0
    return stateless_keep_mask(inputs, layer.rate, sub_seed(seed, site)), 1.0 / (1.0 - layer.rate)


def stateless_keep_mask(inputs, rate, seed):
    """The units a seeded dropout keeps: a bool tensor shaped like `inputs`.

    `tf.nn.experimental.stateless_dropout` draws float uniforms with the
    `auto_select` algorithm, which XLA on CPU expands to a generator many times
    slower than TensorFlow's own kernel, making the XLA step the slow one. Here
    the mask compares raw Philox bits, 16 per unit (each 32-bit draw serves two
    units), with an integer threshold: no float
    conversion, half the generator's work, the same mask with and without XLA,
    and Philox is counter-based on every backend (`auto_select` stays on TPUs,
    whose native generator is the fast one there).

    Args:
        inputs: the tensor the mask is for (only its shape is read).
        rate: Python float in `[0, 1)`, the probability of dropping a unit.
        seed: int `[2]` stateless seed.

    Returns:
        bool, shaped like `inputs`: True where the unit is kept.

    Example:
    >>> keep = stateless_keep_mask(tf.zeros((4, 1000)), 0.25, tf.constant([3, 4], tf.int64))
    >>> round(float(tf.reduce_mean(tf.cast(keep, tf.float32))), 2)
    0.75
    """
    return _keep_mask_of_shape(tf.shape(inputs), inputs.shape[-1], rate, seed)


def _keep_mask_of_shape(shape, static_last, rate, seed):
    """`stateless_keep_mask` for a tensor of `shape` (an int vector); `static_last` its last size or None."""
    last = shape[-1]
    # 16 random bits per unit: each 32-bit draw decides two units, half the generator's
    # work on every backend. On CPU, XLA's Philox fused into the select cost more than TensorFlow's
    # kernel (the XLA step's largest excess); split draws cost less than the kernel's.
    half_shape = tf.concat([shape[:-1], [(last + 1) // 2]], axis=0)
    bits = stateless_random_bits(half_shape, seed)  # [..., ceil(last / 2)]
    threshold = min(int(round(rate * 2.0 ** 16)), 2 ** 16 - 1)
    # The low half decides the first ceil(last / 2) units, the high half the rest. The
    # high half is compared in place (`bits >= threshold * 2**16` is `bits >> 16 >= threshold`),
    # and the halves are joined as booleans: a quarter of the bytes of joining the bits.
    keep = tf.concat([tf.bitwise.bitwise_and(bits, 0xFFFF) >= tf.constant(threshold, tf.uint32),
                      bits >= tf.constant(threshold << 16, tf.uint32)],
                     axis=-1)  # [..., 2 * ceil(last / 2)]
    if static_last is None or static_last % 2:
        keep = keep[..., :last]  # shaped like inputs
    return keep


def stateless_random_bits(shape, seed):
    """uint32 random bits, a pure function of `seed`: the same bits with and without XLA.

    Philox is counter-based and TensorFlow's kernel and XLA's expansion of it
    give the same bits on every backend; `auto_select` (which may pick another
    generator under XLA) is kept on TPUs only, where the native generator is
    the fast one. Seeded dropout masks and the generation samplers' draws both
    come from here.

    Args:
        shape: the output shape (a list or an int vector).
        seed: int `[2]` stateless seed.

    Returns:
        uint32, of `shape`.

    Example:
    >>> a = stateless_random_bits([3], tf.constant([1, 2], tf.int64))
    >>> b = tf.function(stateless_random_bits, jit_compile=True)([3], tf.constant([1, 2], tf.int64))
    >>> bool(tf.reduce_all(a == b))
    True
    """
    on_tpu = isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)
    return tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None, dtype=tf.uint32,
                                       alg="auto_select" if on_tpu else "philox")


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
        The int64 counter variable (restored with the optimizer's state).
    """
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    counter = getattr(optimizer, "_iterations", None)
    return optimizer.iterations if counter is None else counter


def step_dropout_seed(run_seed, step):
    """The `[2]` int64 seed of every dropout mask of one training step on this replica.

    Args:
        run_seed: Python int, fixed for the whole run (also across a resume).
        step: int scalar tensor, the micro-batch counter (`micro_batch_counter`).

    Returns:
        int64 `[2]`: `fold_in(fold_in(run_seed, step), replica id)`; replicas get
        different masks, the same step of a resumed run the same ones.

    Example:
    >>> a = step_dropout_seed(7, tf.constant(3, tf.int64))
    >>> b = step_dropout_seed(7, tf.constant(4, tf.int64))
    >>> bool(tf.reduce_all(a == b))
    False
    """
    run_seed = int(run_seed)
    seed = tf.constant([run_seed & 0x7FFFFFFF, (run_seed >> 31) & 0x7FFFFFFF], tf.int64)  # [2]
    seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(step, tf.int64))
    return tf.random.experimental.stateless_fold_in(seed, tf.cast(_replica_id(), tf.int64))


def training_dropout_seed(model, training):
    """`step_dropout_seed` of `model`'s current step, or None outside training or before `compile`.

    None leaves every dropout to its Keras layer (inference is unchanged, and a
    model called for training without an optimizer keeps stateful dropout).

    Args:
        model: a compiled model with a `backbone` holding `dropout_run_seed`.
        training: the call's `training` flag.

    Returns:
        int64 `[2]` or None.
    """
    optimizer = getattr(model, "optimizer", None)
    if not training or optimizer is None:
        return None
    backbone = getattr(model, "backbone", model)
    return step_dropout_seed(backbone.dropout_run_seed, micro_batch_counter(optimizer))


def sub_seed(seed, index):
    """`fold_in(seed, index)`, None for a None seed (the two users of a step seed draw apart)."""
    if seed is None:
        return None
    return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), index)  # [2]


def _replica_id():
    context = tf.distribute.get_replica_context()
    # Cross-replica context (a call outside `strategy.run`) counts as replica 0.
    return 0 if context is None else context.replica_id_in_sync_group
