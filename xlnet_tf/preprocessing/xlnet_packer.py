"""`XLNetPacker`: packs one or two token-id segments as `A <sep> [B <sep>] <cls>`, left-padded."""

import keras
import numpy as np
from xlnet_tf.tensorflow_required import tensorflow as tf

from xlnet_tf.formats.finetuning_records import SEGMENT_A, SEGMENT_B, SEGMENT_CLS, SEGMENT_PAD
from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID
from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.formats.special_tokens import SEP_TOKEN_ID
from xlnet_tf.preprocessing.batch_size_check import same_batch_size

TRUNCATION_STRATEGIES = ("longest_first", "keep_second")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPacker(keras.layers.Layer):
    """Packs token ids into XLNet's fine-tuning layout, inside the graph.

    Layout (left padding, `<cls>` last, as the original XLNet fine-tuning code):

        [<pad> ... <pad>] A <sep> B <sep> <cls>      (pair)
        [<pad> ... <pad>] A <sep> <cls>              (single segment)

    Segment ids: A and its `<sep>` 0, B and its `<sep>` 1, `<cls>` 2, padding 4
    (the original `SEG_ID_*` values). `padding_mask` is 1 on real tokens.

    Truncation (applied to the pieces before the special tokens are added):
    - `"longest_first"` (default, the original `_truncate_seq_pair`): while the
      pair is too long, drop the last piece of the longer segment (of B on a tie).
      A single segment keeps its first `sequence_length - 2` pieces.
    - `"keep_second"` (the original RACE recipe): B first keeps only its *last*
      `second_max_length` pieces (when set) and, if still too long, its last
      `sequence_length - 3` pieces; then A keeps its first pieces that fit.

    Runs on batched (`[B, None]`, ragged or dense) or unbatched (`[None]`)
    int tensors, so it can be mapped over a `tf.data.Dataset` or traced into a
    SavedModel. An empty segment is allowed (it packs to just its `<sep>`).

    Args:
        sequence_length: output length L (>= 3 for a single segment, >= 4 for pairs).
        sep_token_id: id of `<sep>` (4 in the released vocabulary).
        cls_token_id: id of `<cls>` (3).
        pad_token_id: id of `<pad>` (5).
        truncate: `"longest_first"` or `"keep_second"`.
        second_max_length (int | None): cap on B's length for `"keep_second"` (original RACE: 128).
        **kwargs: `name`, ...

    Call arguments:
        inputs: token ids of one segment (`[B, None]` ragged/dense tensor, `[None]`,
            or a nested Python list, which is one batch), or a tuple (or list of
            tensors) of one or two segments (A, B).

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, each `[B, L]`
        (or `[L]` for unbatched input).

    Example:
    >>> from xlnet_tf import XLNetPacker
    >>> packer = XLNetPacker(sequence_length=8)
    >>> out = packer(([[10, 11, 12]], [[20]]))
    >>> out["token_ids"].numpy().tolist()
    [[5, 10, 11, 12, 4, 20, 4, 3]]
    >>> out["segment_ids"].numpy().tolist()
    [[4, 0, 0, 0, 0, 1, 1, 2]]
    """

    def __init__(self, sequence_length, sep_token_id=SEP_TOKEN_ID, cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID,
                 truncate="longest_first", second_max_length=None, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if truncate not in TRUNCATION_STRATEGIES:
            raise ValueError(f"XLNetPacker.truncate must be one of {TRUNCATION_STRATEGIES}, "
                             f"got {truncate!r}.")
        if int(sequence_length) < 3:
            raise ValueError(f"XLNetPacker.sequence_length must be >= 3, got {sequence_length}.")
        if second_max_length is not None and int(second_max_length) < 0:
            raise ValueError(f"XLNetPacker.second_max_length must be >= 0, got {second_max_length}.")
        self.sequence_length = int(sequence_length)
        self.sep_token_id = int(sep_token_id)
        self.cls_token_id = int(cls_token_id)
        self.pad_token_id = int(pad_token_id)
        self.truncate = truncate
        self.second_max_length = None if second_max_length is None else int(second_max_length)
        # Ragged and string-free int inputs go straight to `call` (no Keras conversion).
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def call(self, inputs):
        # A tuple, or a list of tensors, is (A[, B]); a plain nested Python list is one batch.
        if isinstance(inputs, tuple) or (isinstance(inputs, list) and inputs and all(
                isinstance(x, (tf.Tensor, tf.RaggedTensor, np.ndarray)) for x in inputs)):
            segments = list(inputs)
        else:
            segments = [inputs]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"XLNetPacker takes one or two segments, got {len(segments)}.")
        segments = [_to_ragged(s, i) for i, s in enumerate(segments)]
        unbatched = segments[0].shape.rank == 1
        if unbatched:
            segments = [tf.RaggedTensor.from_tensor(s[None, :]) if not isinstance(s, tf.RaggedTensor)
                        else s for s in segments]
        ranks = {s.shape.rank for s in segments}
        if ranks != {2}:
            raise ValueError(f"XLNetPacker: segments must all be rank 1 or all rank 2, got ranks {ranks}.")
        if len(segments) == 2:
            # B rows of a different count would broadcast against A's, packing garbage.
            segments = list(same_batch_size("XLNetPacker", {"segment A": segments[0],
                                                            "segment B": segments[1]}).values())
        outputs = self._pack(segments)
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _pack(self, segments):
        length = self.sequence_length
        lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
        if len(segments) == 1:
            keeps = [tf.minimum(lengths[0], length - 2)]
            drops = [tf.zeros_like(keeps[0])]  # pieces dropped at the front of each segment
        else:
            if length < 4:
                raise ValueError(f"XLNetPacker: a pair needs sequence_length >= 4, got {length}.")
            keeps, drops = self._truncate_pair(lengths[0], lengths[1], length - 3)
        return scatter_pieces(segments, keeps, drops, length, sep_token_id=self.sep_token_id,
                              cls_token_id=self.cls_token_id, pad_token_id=self.pad_token_id)

    def _truncate_pair(self, len_a, len_b, budget):
        """Pieces kept and pieces dropped at the front, per row, for A and B."""
        if self.truncate == "longest_first":
            # Closed form of "pop from the longer, B on ties": the longer ends at
            # ceil(budget / 2) unless the shorter leaves it more room.
            keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
            keep_b = tf.minimum(len_b, budget - keep_a)
            return [keep_a, keep_b], [tf.zeros_like(keep_a), tf.zeros_like(keep_b)]
        cap = budget if self.second_max_length is None else min(budget, self.second_max_length)
        keep_b = tf.minimum(len_b, cap)
        keep_a = tf.minimum(len_a, budget - keep_b)
        return [keep_a, keep_b], [tf.zeros_like(keep_a), len_b - keep_b]

    def get_config(self):
        config = super().get_config()
        config.update({
            "sequence_length": self.sequence_length, "sep_token_id": self.sep_token_id,
            "cls_token_id": self.cls_token_id, "pad_token_id": self.pad_token_id,
            "truncate": self.truncate, "second_max_length": self.second_max_length,
        })
        return config

    def compute_output_shape(self, input_shape):
        return {k: (None, self.sequence_length) for k in ("token_ids", "segment_ids", "padding_mask")}


def scatter_pieces(segments, keeps, drops, length, *, sep_token_id=SEP_TOKEN_ID,
                   cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID):
    """Lays out `A <sep> [B <sep>] <cls>` right-aligned in rows of `length` (left padding).

    Computes where every kept piece lands and scatters it into a padded row: a
    handful of ops, cheap to trace, the same for every row length. Shared by
    `XLNetPacker` (a static length, pieces truncated) and the serving
    `LongDocumentPacker` (a length computed in the graph, nothing cut).

    Args:
        segments: one or two ragged int32 `[B, None]` tensors (A[, B]).
        keeps: per segment, int32 `[B]` pieces kept.
        drops: per segment, int32 `[B]` pieces dropped at the front.
        length: the row length T (Python int or int32 scalar), at least every row's
            kept pieces + separators + `<cls>`.
        sep_token_id, cls_token_id, pad_token_id: special ids.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, each `[B, T]`.
    """
    batch = segments[0].nrows(out_type=tf.int32)
    total = sum(keeps) + len(segments) + 1
    start = length - total  # [B], first real position of each row
    indices, tokens, segment_values = [], [], []
    for segment, keep, drop, segment_id in zip(segments, keeps, drops, (SEGMENT_A, SEGMENT_B)):
        rows = tf.cast(segment.value_rowids(), tf.int32)
        within = tf.range(tf.shape(segment.values)[0]) - tf.gather(
            tf.cast(segment.row_starts(), tf.int32), rows) - tf.gather(drop, rows)
        kept = tf.logical_and(within >= 0, within < tf.gather(keep, rows))
        rows = tf.boolean_mask(rows, kept)
        columns = tf.gather(start, rows) + tf.boolean_mask(within, kept)
        indices.append(tf.stack([rows, columns], axis=1))  # [N, 2]
        tokens.append(tf.boolean_mask(tf.cast(segment.values, tf.int32), kept))
        segment_values.append(tf.fill(tf.shape(rows), segment_id))
        separator = start + keep
        indices.append(tf.stack([tf.range(batch), separator], axis=1))  # [B, 2]
        tokens.append(tf.fill([batch], sep_token_id))
        segment_values.append(tf.fill([batch], segment_id))
        start = separator + 1
    indices.append(tf.stack([tf.range(batch), tf.fill([batch], length - 1)], axis=1))  # [B, 2]
    tokens.append(tf.fill([batch], cls_token_id))
    segment_values.append(tf.fill([batch], SEGMENT_CLS))
    indices = tf.concat(indices, axis=0)  # [N, 2]
    shape = tf.stack([batch, length])

    def scatter(values, fill):
        return tf.tensor_scatter_nd_update(tf.fill(shape, fill), indices, tf.concat(values, 0))

    return {
        "token_ids": scatter(tokens, pad_token_id),  # [B, T]
        "segment_ids": scatter(segment_values, SEGMENT_PAD),  # [B, T]
        "padding_mask": scatter([tf.ones_like(t) for t in tokens], 0),  # [B, T]
    }


def _to_ragged(x, index):
    if isinstance(x, tf.RaggedTensor):
        if not x.dtype.is_integer:
            raise TypeError(f"XLNetPacker: segment {index} must hold integer ids, got {x.dtype}.")
        return tf.cast(x, tf.int32)
    if isinstance(x, list):
        x = tf.ragged.constant(x, dtype=tf.int32) if x and isinstance(x[0], (list, tuple)) \
            else tf.constant(x, dtype=tf.int32)
        if isinstance(x, tf.RaggedTensor):
            return x
    x = tf.convert_to_tensor(x)
    if not x.dtype.is_integer:
        raise TypeError(f"XLNetPacker: segment {index} must hold integer ids, got {x.dtype} "
                        "(tokenize strings first).")
    x = tf.cast(x, tf.int32)
    if x.shape.rank == 2:
        return tf.RaggedTensor.from_tensor(x)
    if x.shape.rank != 1:
        raise ValueError(f"XLNetPacker: segment {index} must be rank 1 or 2, got shape {x.shape}.")
    return x
