"""Reading a long document as consecutive segments, with recurrence memory carried between them.

A document longer than one window of `sequence_length` L is packed as today's
single window, but at length S * L (left padding, `<cls>` last), and cut into
S consecutive segments `[B, S, L]`. The backbone reads them in order; each
segment attends to the cached layer inputs of the earlier ones (`mems`, the
last `memory_length` positions, without gradient, as in pretraining), and the
task head reads the last segment, which always ends with `<cls>`. Leading
segments made of padding only are "padding segments": the positions they leave
in the memory are closed by `memory_padding_mask`, so a short document gives
the same output under any S.

Runs on every Keras backend: on TensorFlow the segments are read in a
`tf.while_loop` (S may be unknown when tracing), on JAX and PyTorch in
`keras.ops.fori_loop` over the static S (a `lax.scan` in JAX, a Python loop in
PyTorch).
"""

import sys
import warnings

import keras
import numpy as np
from keras import ops

from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.token_id_checks import concrete_values

# `XLNetPacker.SEGMENT_PAD`, restated because models sit below preprocessing in the
# import order; a test checks that the two agree.
PADDING_SEGMENT_ID = 4
FEATURE_KEYS = ("token_ids", "segment_ids", "padding_mask")
_PAD_VALUES = {"token_ids": PAD_TOKEN_ID, "segment_ids": PADDING_SEGMENT_ID, "padding_mask": 0}


def next_memory_padding_mask(memory_padding_mask, padding_mask, memory_length, reuse_length=0):
    """The padding mask of the memory after one more segment, as `new_mems` is built.

    The backbone caches the first `reuse_length` positions of each layer's
    input (the whole segment when 0), appends them to the previous memory and
    keeps the last `memory_length`; this does the same to the masks.

    Args:
        memory_padding_mask: int/bool `[B, M]` (1 = real memory position), or None
            for no earlier memory.
        padding_mask: int/bool `[B, L]` of the segment just read (1 = real token).
        memory_length: the backbone's `memory_length` (> 0).
        reuse_length: the backbone's `reuse_length` (0 = the whole segment).

    Returns:
        int32 `[B, min(M + C, memory_length)]`, C = `reuse_length` or L.

    Example:
    >>> mask = next_memory_padding_mask(np.array([[0, 0, 1]]), np.array([[0, 1]]), 3)
    >>> keras.ops.convert_to_numpy(mask).tolist()  # [0, 0, 1] + [0, 1], the last 3 kept
    [[1, 0, 1]]
    """
    if memory_length <= 0:
        raise ValueError(f"next_memory_padding_mask: memory_length must be > 0, got {memory_length}.")
    current = ops.cast(padding_mask, "int32")
    if reuse_length > 0:
        current = current[:, :reuse_length]  # [B, C]
    if memory_padding_mask is not None:
        current = ops.concatenate([ops.cast(memory_padding_mask, "int32"), current], axis=1)  # [B, M+C]
    return current[:, -memory_length:]  # [B, memory_length]


def split_into_segments(features, sequence_length):
    """Cuts packed (left-padded) features `[B, T]` into consecutive segments `[B, ceil(T / L), L]`.

    The features are first left-padded to a multiple of L with `<pad>` (id 5),
    segment id 4 (`XLNetPacker.SEGMENT_PAD`) and padding_mask 0, so the last
    segment ends where the packed sequence ends (with `<cls>`). Works on
    unbatched features `[T]` (giving `[S, L]`) too. TensorFlow tensors (and
    every input on the TensorFlow backend) are cut with TensorFlow ops, also
    inside a graph with a dynamic T, e.g. in a `tf.data` map before batching;
    other inputs with `keras.ops` (a static T).

    Args:
        features: dict with `token_ids`, `segment_ids`, `padding_mask`, int `[B, T]`
            (or `[T]`); other keys (labels) are returned unchanged.
        sequence_length: L, a Python int >= 1.

    Returns:
        The dict with the three features int32 `[B, S, L]` (or `[S, L]`).

    Example:
    >>> segments = split_into_segments({"token_ids": [[11, 12, 4, 3]], "segment_ids": [[0, 0, 0, 2]],
    ...                                 "padding_mask": [[1, 1, 1, 1]]}, 3)
    >>> keras.ops.convert_to_numpy(segments["token_ids"]).tolist()
    [[[5, 5, 11], [12, 4, 3]]]
    """
    sequence_length = int(sequence_length)
    if sequence_length < 1:
        raise ValueError(f"split_into_segments: sequence_length must be >= 1, got {sequence_length}.")
    missing = [key for key in FEATURE_KEYS if key not in features]
    if missing:
        raise ValueError(f"split_into_segments: features lack {missing}; got {sorted(features)}.")
    with_tensorflow = keras.config.backend() == "tensorflow" or any(
        _is_tensorflow_tensor(features[key]) for key in FEATURE_KEYS)
    result = dict(features)
    rank = None
    for key in FEATURE_KEYS:
        if with_tensorflow:
            import tensorflow as tf

            # TensorFlow: a graph (tf.data, serving) may know T only when it runs.
            tensor = tf.cast(tf.convert_to_tensor(features[key]), tf.int32)
        else:
            tensor = ops.cast(ops.convert_to_tensor(features[key]), "int32")
        tensor_rank = static_rank(tensor)
        if tensor_rank not in (1, 2) or (rank is not None and tensor_rank != rank):
            raise ValueError(f"split_into_segments: {key!r} must be [B, T] (or [T]) like the other "
                             f"features, got shape {tuple(tensor.shape)}.")
        rank = tensor_rank
        batched = tensor if rank == 2 else tensor[None]  # [B, T]
        if with_tensorflow:
            total = tf.shape(batched)[1]
            pad = tf.math.floormod(-total, sequence_length)
            batched = tf.pad(batched, [[0, 0], [pad, 0]], constant_values=_PAD_VALUES[key])  # [B, S*L]
            segments = tf.reshape(batched, [tf.shape(batched)[0], -1, sequence_length])  # [B, S, L]
        else:
            pad = -batched.shape[1] % sequence_length
            batched = ops.pad(batched, [[0, 0], [pad, 0]], constant_values=_PAD_VALUES[key])  # [B, S*L]
            segments = ops.reshape(batched, (batched.shape[0], -1, sequence_length))  # [B, S, L]
        result[key] = segments if rank == 2 else segments[0]  # [S, L] unbatched
    return result


def static_rank(tensor):
    """The rank known when tracing, or None (a `tf.TensorShape` of unknown rank)."""
    shape = tensor.shape
    return shape.rank if hasattr(shape, "rank") else len(shape)


def with_segment_axis(tensor, window_rank):
    """A tensor of unknown rank as one with a segment axis: rank `window_rank + 1`.

    `model.predict` on windows `[B, L]` and then on segments `[B, S, L]` (or the
    multiple-choice `[B, C, L]` / `[B, C, S, L]`) relaxes its traced input to an
    unknown rank on TensorFlow; a window then becomes one segment (`S = 1`, read
    through closed memory: equal to the window within float rounding). On JAX
    and PyTorch every rank is known: a window gets its segment axis directly.

    Args:
        tensor: a tensor of rank `window_rank` or `window_rank + 1`, checked at run time.
        window_rank: 2 for the classifier, 3 for multiple choice.

    Returns:
        The tensor with static rank `window_rank + 1`.

    Example:
    >>> tuple(with_segment_axis(np.zeros([2, 5]), 2).shape)
    (2, 1, 5)
    """
    message = f"token_ids must have rank {window_rank} (windows) or {window_rank + 1} (segments)"
    if keras.config.backend() != "tensorflow":
        tensor = ops.convert_to_tensor(tensor)
        rank = len(tensor.shape)
        if rank not in (window_rank, window_rank + 1):
            raise ValueError(f"{message}; got shape {tuple(tensor.shape)}.")
        return ops.expand_dims(tensor, -2) if rank == window_rank else tensor  # [..., S, L]
    import tensorflow as tf

    # tf.shape and tf.cond: only the graph knows the rank (predict's relaxed trace).
    tensor = tf.convert_to_tensor(tensor)
    shape = tf.shape(tensor)
    rank = tf.size(shape)
    tf.debugging.assert_equal(
        tf.logical_or(tf.equal(rank, window_rank), tf.equal(rank, window_rank + 1)), True,
        message=message)
    segmented = tf.cond(
        tf.equal(rank, window_rank),
        lambda: tf.concat([shape[:-1], [1], shape[-1:]], axis=0),  # one segment
        lambda: shape)
    segmented = tf.reshape(segmented, [window_rank + 1])  # a static length: a static rank
    return tf.reshape(tensor, segmented)


def _is_tensorflow_tensor(value):
    tf = sys.modules.get("tensorflow")  # Only an imported TensorFlow can hand over its tensors.
    return tf is not None and isinstance(value, (tf.Tensor, tf.Variable))


def _segment_features(features):
    """The three features as int tensors `[B, S, L]`, checked."""
    missing = [key for key in FEATURE_KEYS if key not in features]
    if missing:
        raise ValueError(f"last_segment_output: features lack {missing}; got {sorted(features)}.")
    tensors = {}
    for key in FEATURE_KEYS:
        tensor = _to_tensor(features[key])
        if keras.backend.standardize_dtype(tensor.dtype) == "bool":
            tensor = ops.cast(tensor, "int32")
        if static_rank(tensor) != 3:
            raise ValueError(f"last_segment_output: {key!r} must be [batch, segments, length], got "
                             f"shape {tuple(tensor.shape)}.")
        tensors[key] = tensor
    shape = tuple(tensors["token_ids"].shape)
    for key in FEATURE_KEYS[1:]:
        other = tuple(tensors[key].shape)
        if any(a is not None and b is not None and a != b for a, b in zip(other, shape)):
            raise ValueError(f"last_segment_output: {key!r} has shape {other}, token_ids {shape}.")
    return tensors


def _to_tensor(value):
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        # tf.convert_to_tensor keeps a graph's tensors as they are (a dynamic number of segments).
        return tf.convert_to_tensor(value)
    return ops.convert_to_tensor(value)


def last_segment_output(backbone, features, training=None, dropout_seed=None, output_positions=None):
    """The backbone's content stream on the last segment, after reading the earlier ones into memory.

    Segments 0..S-2 run in a loop with fixed shapes (TensorFlow: a
    `tf.while_loop`, XLA and distribution friendly, S static or dynamic; JAX
    and PyTorch: `keras.ops.fori_loop` over the static S) that carries `mems`
    `[B, num_layers, M, H]` and their `memory_padding_mask` `[B, M]`, both
    starting as zeros (closed); each segment's memory follows the backbone's
    `memory_length` and `reuse_length` (`next_memory_padding_mask`). Leading
    segments that are padding in every row of the batch are skipped (found on
    the device by TensorFlow's loop; on JAX and PyTorch in eager inputs, while a
    jitted JAX step reads them all): they would only add closed memory
    positions, so the output is the same either way. The gradient stops at the
    memory, as in pretraining, so only the last segment's pass is
    differentiated.

    With `memory_length` 0 (memory off) only the last segment is read, with a
    `UserWarning` naming the setting (a static S > 1 only). With a
    static S of 1 the backbone is called on it without memory, exactly as a
    single window.

    Args:
        backbone: an `XLNetBackbone`.
        features: dict of `token_ids`, `segment_ids`, `padding_mask`, int `[B, S, L]`
            (S >= 1; on TensorFlow S may be dynamic), laid out by
            `split_into_segments` or the long-document packing (leading padding,
            `<cls>` last).
        training: Python bool, enables dropout.
        dropout_seed: int `[2]` step seed or None. Segment i draws its masks from
            `seeded_dropout.sub_seed(dropout_seed, i)`; in training without one, a
            seed is drawn from the backbone's dropout generator for the whole call.
        output_positions: optional int `[B, Q]`, the backbone's `output_positions`
            for the last segment (e.g. its `<cls>`). The earlier segments only
            feed the memory, which caches each layer's input, so their last
            layer always runs at one position.

    Returns:
        `sequence_output` of the last segment, `[B, L, H]` (`[B, Q, H]` with
        `output_positions`).

    Example:
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=20, num_layers=1, num_heads=2, head_dim=4,
    ...                                      hidden_dim=8, intermediate_dim=16, memory_length=8))
    >>> ids = np.full([2, 3, 4], 11, "int32")
    >>> output = last_segment_output(backbone, {"token_ids": ids, "segment_ids": ids * 0,
    ...                                         "padding_mask": ids * 0 + 1})
    >>> tuple(output.shape)
    (2, 4, 8)
    """
    tensors = _segment_features(features)
    config = backbone.config
    token_ids = tensors["token_ids"]
    num_segments = token_ids.shape[1]
    if num_segments is None:
        import tensorflow as tf

        # Only a TensorFlow graph leaves the number of segments to run time.
        num_segments = tf.shape(token_ids)[1]
    elif num_segments < 1:
        raise ValueError("last_segment_output: features hold no segment (shape "
                         f"{tuple(token_ids.shape)}).")
    if training and dropout_seed is None:
        # One stateless seed for the call, so the loop body draws no generator state.
        dropout_seed = backbone._draw_dropout_seed()
    last_index = num_segments - 1
    last = {key: tensor[:, -1] for key, tensor in tensors.items()}  # [B, L]
    last_seed = seeded_dropout.sub_seed(dropout_seed, last_index)
    if config.memory_length <= 0 and isinstance(num_segments, int) and num_segments > 1:
        # Memory that silently does nothing is the classic XLNet long-document bug: say so.
        warnings.warn(
            f"last_segment_output: the features hold {num_segments} segments but the backbone's "
            "memory_length is 0, so only the last segment is read. Build the backbone with "
            "memory_length > 0 (e.g. XLNetBackbone.from_preset(preset, memory_length=L)) to let the "
            "earlier segments reach it.", stacklevel=2)
    if config.memory_length <= 0 or (isinstance(num_segments, int) and num_segments == 1):
        return backbone(last, training=training, dropout_seed=last_seed,
                        output_positions=output_positions)["sequence_output"]

    if keras.config.backend() == "tensorflow":
        mems, memory_mask = _read_earlier_segments_in_a_while_loop(
            backbone, tensors, training, dropout_seed, last_index)
    else:
        mems, memory_mask = _read_earlier_segments(backbone, tensors, training, dropout_seed, last_index)
    outputs = backbone(dict(last, mems=ops.stop_gradient(mems), memory_padding_mask=memory_mask),
                       training=training, dropout_seed=last_seed, output_positions=output_positions)
    return outputs["sequence_output"]


def _read_earlier_segments_in_a_while_loop(backbone, tensors, training, dropout_seed, last_index):
    """TensorFlow: segments `[start, last_index)` into `(mems, memory_padding_mask)` in a `tf.while_loop`.

    A while loop (not a scan over a static S): S may be known only when the
    graph runs (`predict`'s relaxed trace, a serving signature), and the loop
    starts at the first segment with a real token, computed on the device.
    """
    import tensorflow as tf

    config = backbone.config
    token_ids = tensors["token_ids"]
    memory_length = config.memory_length
    batch_size = token_ids.shape[0]
    dynamic_batch = tf.shape(token_ids)[0]
    mems_shape = tf.TensorShape([batch_size, config.num_layers, memory_length, config.hidden_dim])
    mask_shape = tf.TensorShape([batch_size, memory_length])
    mems = tf.zeros([dynamic_batch, config.num_layers, memory_length, config.hidden_dim],
                    backbone.compute_dtype)  # [B, num_layers, M, H]
    memory_mask = tf.zeros([dynamic_batch, memory_length], tf.int32)  # [B, M]

    # The first segment with a real token in any row (the last one if none has any).
    real_segment = tf.reduce_any(tf.cast(tensors["padding_mask"], tf.bool), axis=2)  # [B, S]
    first_real = tf.where(tf.reduce_any(real_segment, axis=1),
                          tf.argmax(tf.cast(real_segment, tf.int32), axis=1, output_type=tf.int32),
                          last_index)  # [B]
    start = tf.reduce_min(first_real)
    # Any one position: the memory is cached from each layer's input, the last layer's output unused.
    unused_output = tf.zeros([dynamic_batch, 1], tf.int32)  # [B, 1]

    def read_segment(index, mems, memory_mask):
        segment = {key: tf.gather(tensor, index, axis=1) for key, tensor in tensors.items()}  # [B, L]
        outputs = backbone(dict(segment, mems=mems, memory_padding_mask=memory_mask),
                           training=training,
                           dropout_seed=seeded_dropout.sub_seed(dropout_seed, index),
                           output_positions=unused_output)
        # Both keep the last memory_length positions; with a segment length unknown when tracing
        # their static length is lost, so a reshape (free, unlike an EnsureShape op inside an XLA
        # cluster) restates it for the loop's shape invariants.
        new_mems = tf.reshape(tf.cast(outputs["new_mems"], mems.dtype),
                              [dynamic_batch, config.num_layers, memory_length,
                               config.hidden_dim])  # [B, num_layers, M, H]
        new_mask = next_memory_padding_mask(memory_mask, segment["padding_mask"], memory_length,
                                            config.reuse_length)
        return index + 1, new_mems, tf.reshape(new_mask, [dynamic_batch, memory_length])  # [B, M]

    _, mems, memory_mask = tf.while_loop(
        lambda index, mems, memory_mask: index < last_index, read_segment,
        (start, mems, memory_mask),
        shape_invariants=(tf.TensorShape([]), mems_shape, mask_shape),
        # One segment at a time: with the default 10, TensorFlow starts later segments' work
        # that does not wait for the memory (embeddings, position projections) and holds it,
        # so peak memory grew with the number of segments instead of staying flat.
        parallel_iterations=1)
    return mems, memory_mask


def _read_earlier_segments(backbone, tensors, training, dropout_seed, last_index):
    """JAX and PyTorch: segments `[start, last_index)` into `(mems, memory_padding_mask)`.

    `keras.ops.fori_loop` with static bounds: a `lax.scan` on JAX (one traced
    body for every S, reverse-differentiable), a Python loop on PyTorch.
    """
    config = backbone.config
    memory_length = config.memory_length
    batch_size = tensors["token_ids"].shape[0]
    mems = ops.zeros((batch_size, config.num_layers, memory_length, config.hidden_dim),
                     backbone.compute_dtype)  # [B, num_layers, M, H]
    memory_mask = ops.zeros((batch_size, memory_length), "int32")  # [B, M]
    # Any one position: the memory is cached from each layer's input, the last layer's output unused.
    unused_output = ops.zeros((batch_size, 1), "int32")  # [B, 1]

    def read_segment(index, carry):
        mems, memory_mask = carry
        segment = {key: ops.take(tensor, index, axis=1) for key, tensor in tensors.items()}  # [B, L]
        outputs = backbone(dict(segment, mems=mems, memory_padding_mask=memory_mask),
                           training=training,
                           dropout_seed=seeded_dropout.sub_seed(dropout_seed, index),
                           output_positions=unused_output)
        new_mems = ops.cast(outputs["new_mems"], mems.dtype)  # [B, num_layers, M, H]
        new_mask = next_memory_padding_mask(memory_mask, segment["padding_mask"], memory_length,
                                            config.reuse_length)  # [B, M]
        return new_mems, new_mask

    start = _first_real_segment(tensors["padding_mask"], last_index)
    return ops.fori_loop(start, last_index, read_segment, (mems, memory_mask))


def _first_real_segment(padding_mask, last_index):
    """The first segment with a real token in any row (`last_index` if none has any), a Python int.

    0 when the mask is traced (a jitted JAX step): the loop then also reads the
    leading padding segments, whose memory positions stay closed.
    """
    values = concrete_values(padding_mask)
    if values is None:
        return 0
    real_segment = values.astype(bool).any(axis=2)  # [B, S]
    first_real = np.where(real_segment.any(axis=1), real_segment.argmax(axis=1), last_index)  # [B]
    return int(first_real.min())
