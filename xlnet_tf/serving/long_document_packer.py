"""`LongDocumentPacker`: packs whole documents, any length, into a whole number of segments."""

import tensorflow as tf

from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID
from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.formats.special_tokens import SEP_TOKEN_ID
from xlnet_tf.preprocessing.xlnet_packer import TRUNCATION_STRATEGIES
from xlnet_tf.preprocessing.xlnet_packer import scatter_pieces


class LongDocumentPacker:
    """Packs `A <sep> [B <sep>] <cls>` without truncation, left-padded to a multiple of `segment_length`.

    The layout is `XLNetPacker`'s (left padding, `<cls>` last, segment ids
    A 0 / B 1 / `<cls>` 2 / padding 4) at the length `T = S * segment_length`,
    where `S` is the smallest number of segments that holds the longest row of
    the batch; no piece of any row is dropped. That is the long-document layout
    of fine-tuning with `max_segments = S` for every document that fit there,
    so reshaping the result to `[B, S, segment_length]` gives the training
    segments. `S` is computed in the graph: a serving signature built on this
    takes documents of any length.

    The one cut kept is the multiple-choice recipe's (`truncate="keep_second"`
    with `second_max_length`): the B segment (question + option) keeps its last
    `second_max_length` pieces, as `XLNetPacker` does at every length.

    Args:
        segment_length: int, the length `L` of one segment (the model's sequence length).
        truncate: `"longest_first"` (nothing is cut) or `"keep_second"`.
        second_max_length: for `"keep_second"`, the cap on B's pieces (None: no cap).
        sep_token_id, cls_token_id, pad_token_id: special ids (the released vocabulary's by default).

    Call arguments:
        segments: a list of one or two ragged int `[B, None]` tensors of piece ids (A[, B]).

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, each `[B, T]` with
        `T` a multiple of `segment_length` and at least `segment_length`.

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.serving.long_document_packer import LongDocumentPacker
    >>> packer = LongDocumentPacker(segment_length=4)
    >>> out = packer([tf.ragged.constant([[10, 11, 12], [13]])])
    >>> out["token_ids"].numpy().tolist()
    [[5, 5, 5, 10, 11, 12, 4, 3], [5, 5, 5, 5, 5, 13, 4, 3]]
    """

    def __init__(self, segment_length, *, truncate="longest_first", second_max_length=None,
                 sep_token_id=SEP_TOKEN_ID, cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID):
        if not isinstance(segment_length, int) or isinstance(segment_length, bool) or segment_length < 3:
            raise ValueError(
                f"LongDocumentPacker.segment_length must be an int >= 3, got {segment_length!r}.")
        if truncate not in TRUNCATION_STRATEGIES:
            raise ValueError(f"LongDocumentPacker.truncate must be one of {TRUNCATION_STRATEGIES}, "
                             f"got {truncate!r}.")
        if second_max_length is not None and int(second_max_length) < 0:
            raise ValueError(f"LongDocumentPacker.second_max_length must be >= 0, got {second_max_length}.")
        self.segment_length = segment_length
        self.truncate = truncate
        self.second_max_length = None if second_max_length is None else int(second_max_length)
        self.sep_token_id = int(sep_token_id)
        self.cls_token_id = int(cls_token_id)
        self.pad_token_id = int(pad_token_id)

    def __call__(self, segments):
        segments = [tf.cast(s, tf.int32) for s in segments]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"LongDocumentPacker takes one or two segments, got {len(segments)}.")
        lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
        keeps = list(lengths)
        drops = [tf.zeros_like(k) for k in keeps]  # pieces dropped at the front of each segment
        if len(segments) == 2 and self.truncate == "keep_second" and self.second_max_length is not None:
            keeps[1] = tf.minimum(lengths[1], self.second_max_length)
            drops[1] = lengths[1] - keeps[1]
        total = sum(keeps) + len(segments) + 1  # [B], pieces + separators + <cls>
        # The 1 keeps an empty batch at one segment (the max of nothing is the smallest int).
        longest = tf.reduce_max(tf.concat([total, [1]], axis=0))
        length = -(-longest // self.segment_length) * self.segment_length
        return scatter_pieces(segments, keeps, drops, length, sep_token_id=self.sep_token_id,
                              cls_token_id=self.cls_token_id, pad_token_id=self.pad_token_id)
