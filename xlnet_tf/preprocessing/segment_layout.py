"""The long-document layout: one window packed at `max_segments * sequence_length`, cut into segments.

A long document is packed exactly like a single window (`XLNetPacker`: left
padding, `A <sep> [B <sep>] <cls>` with `<cls>` last, the packer's truncation)
but at length `S * L`, then reshaped to `[S, L]`: segments are consecutive
windows of one left-padded sequence, the leading all-padding segments are
"padding segments", and the last segment always ends with `<cls>` at `L - 1`.
`S = 1` leaves the features untouched (today's `[..., L]` layout).

A packed example is "truncated" when the packer dropped any of its pieces,
i.e. when its packed length before truncation (pieces plus the special
tokens) exceeds `S * L` (or, for `keep_second`, when the second segment went
over `second_max_length`).

Example:
>>> from xlnet_tf.preprocessing.segment_layout import to_segments, truncated_rows
>>> import tensorflow as tf
>>> from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
>>> pieces = tf.ragged.constant([[10, 11, 12, 13, 14]])
>>> packed = XLNetPacker(8)(pieces)  # a window of 2 * 4
>>> to_segments(packed, max_segments=2, sequence_length=4)["token_ids"].numpy().tolist()
[[[5, 10, 11, 12], [13, 14, 4, 3]]]
>>> truncated_rows(packed["padding_mask"], [pieces]).numpy().tolist()
[False]
"""

from xlnet_tf.tensorflow_required import tensorflow as tf


def packed_length(sequence_length, max_segments=1):
    """The length one example is packed at: `max_segments * sequence_length`."""
    return int(sequence_length) * int(max_segments)


def to_segments(features, max_segments, sequence_length):
    """Reshapes packed features `[..., S*L]` to `[..., S, L]`; `max_segments` 1 returns them as they are.

    Args:
        features: dict of int tensors whose last axis has length `max_segments * sequence_length`.
        max_segments: S (>= 1).
        sequence_length: L.

    Returns:
        The same dict with every value reshaped to `[..., S, L]` (unchanged when S is 1).
    """
    max_segments, sequence_length = int(max_segments), int(sequence_length)
    if max_segments == 1:
        return features

    def split(value):
        value = tf.convert_to_tensor(value)
        # The leading axes stay dynamic ([B] in a dataset map, [] for one example).
        shape = tf.concat([tf.shape(value)[:-1], [max_segments, sequence_length]], axis=0)
        return tf.reshape(value, shape)  # [..., S, L]

    return {key: split(value) for key, value in features.items()}


def truncated_rows(padding_mask, segments):
    """Whether the packer dropped pieces of each row.

    Args:
        padding_mask: the packer's `padding_mask` `[B, S*L]` (before `to_segments`).
        segments: the one or two ragged piece tensors `[B, None]` that were packed
            (or their row lengths, int `[B]`).

    Returns:
        bool `[B]`: True where the row keeps fewer real positions than its pieces
        plus the special tokens (one `<sep>` per segment and `<cls>`).
    """
    lengths = [s.row_lengths() if isinstance(s, tf.RaggedTensor) else s for s in segments]
    wanted = tf.add_n([tf.cast(n, tf.int32) for n in lengths]) + len(segments) + 1  # [B]
    kept = tf.reduce_sum(tf.cast(padding_mask, tf.int32), axis=-1)  # [B]
    return kept < wanted
