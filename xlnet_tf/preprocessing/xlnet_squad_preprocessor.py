"""`XLNetSquadPreprocessor`: SQuAD passages and questions -> XLNet windows, inside the graph."""

from xlnet_tf.tensorflow_required import tensorflow as tf

from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID
from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.formats.special_tokens import SEP_TOKEN_ID
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.text_normalization import replace_undecodable_tf


class XLNetSquadPreprocessor:
    """Turns one (passage, question[, answer]) example into `P <sep> Q <sep> <cls>` windows.

    Everything runs in TensorFlow ops (tensorflow-text SentencePiece with
    offsets), so it can be used in `tf.data` (`flat_map` over examples) and
    traced into a SavedModel.

    - The question is tokenized with the project tokenizer (XLNet text
      normalization) and keeps its first `max_query_length` pieces.
    - The passage is tokenized *without* the project's extra normalization
      (whitespace collapsing, accent stripping, quote rewriting), so every
      piece carries the byte offsets of the exact characters it came from;
      SentencePiece's own NFKC normalization still applies and its offsets
      account for it. Pieces like `▁1990,` are split as the tokenizer splits
      them (`split_digit_comma`), with the comma's own byte range. Answers are
      therefore cut from the original passage. With an
      uncased tokenizer (`lowercase=True`) the passage is lowercased for ASCII
      letters only, which keeps the offsets exact.
    - Long passages are split into windows of at most
      `sequence_length - 3 - len(question)` pieces that start every
      `min(doc_stride, that size)` pieces (the original `run_squad.py`
      sliding window), until a window reaches the passage's end.
    - Each window is packed by `XLNetPacker` (left padding, `<cls>` last):
      passage + its `<sep>` segment 0, question + `<sep>` segment 1, `<cls>` 2.

    Labels (when an answer is given): the answer's first piece is the first
    piece ending after the answer's first byte; its last piece is the last one
    starting before the answer's end. A window that does not hold the whole
    answer, and every window of an unanswerable question, points start and end
    at `<cls>` (position L - 1) with `is_impossible = 1`, as the original.

    Args:
        tokenizer: an `xlnet_tf.preprocessing.xlnet_tokenizer.XLNetTokenizer` (its `proto` is reused
            for the passage's offset tokenizer).
        sequence_length: window length L (original SQuAD runs: 512).
        max_query_length: question pieces kept (original: 64).
        doc_stride: window step in passage pieces (original: 128).

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf import XLNetSquadPreprocessor, XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> pre = XLNetSquadPreprocessor(tokenizer, sequence_length=64, max_query_length=16, doc_stride=16)
    >>> windows = pre(tf.constant("The fox jumps."), tf.constant("Who jumps?"))
    >>> windows["token_ids"].shape[1]        # token_ids: [num_windows, 64]
    64
    """

    def __init__(self, tokenizer, sequence_length=512, max_query_length=64, doc_stride=128):
        if sequence_length - 3 - max_query_length < 1:
            raise ValueError(
                f"XLNetSquadPreprocessor: sequence_length ({sequence_length}) must exceed "
                f"max_query_length ({max_query_length}) + 3 to leave room for the passage.")
        if doc_stride < 1:
            raise ValueError(f"XLNetSquadPreprocessor: doc_stride must be >= 1, got {doc_stride}.")
        if tokenizer.proto is None:
            raise ValueError("XLNetSquadPreprocessor: the tokenizer has no SentencePiece model.")
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self.max_query_length = int(max_query_length)
        self.doc_stride = int(doc_stride)
        proto = tokenizer.proto
        if isinstance(proto, str):
            with tf.io.gfile.GFile(proto, "rb") as f:
                proto = f.read()
        # The tokenizer's digit-comma splitting applies to the passage too (with offsets).
        split = tokenizer.digit_comma_split() if hasattr(tokenizer, "digit_comma_split") else None
        # optional dependency: the offsets tokenizer is a tf.Module, so the class imports without TensorFlow
        from xlnet_tf.preprocessing.digit_comma_sentencepiece import DigitCommaSentencepiece

        self._offset_tokenizer = DigitCommaSentencepiece(
            proto, out_type=tf.int32, split=split if split is not None and split.fires else False)
        self._packer = XLNetPacker(self.sequence_length, sep_token_id=SEP_TOKEN_ID,
                                   cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID)
        # The same packing applied to passage piece indices finds each position's piece.
        self._index_packer = XLNetPacker(self.sequence_length, sep_token_id=-1, cls_token_id=-1,
                                         pad_token_id=-1)

    def get_config(self):
        return {"sequence_length": self.sequence_length, "max_query_length": self.max_query_length,
                "doc_stride": self.doc_stride}

    def __call__(self, context, question, answer_start=None, answer_text=None, is_impossible=None):
        """Windows of one example.

        Args:
            context: scalar `tf.string`, the passage (UTF-8; undecodable bytes count as U+FFFD).
            question: scalar `tf.string`.
            answer_start: optional scalar int, the answer's first *character* in `context`
                (SQuAD's `answer_start`); required for training labels.
            answer_text: optional scalar `tf.string`, the answer (its length gives the end).
            is_impossible: optional scalar bool/int, SQuAD 2.0 unanswerable flag.

        Returns:
            dict of tensors with a leading window axis W:
            `token_ids`, `segment_ids`, `padding_mask`, `answer_mask` int32 `[W, L]`;
            `piece_start_bytes`, `piece_end_bytes` int32 `[W, L]` (byte range of each
            passage piece in `context`, -1 elsewhere); `token_is_max_context` int32
            `[W, L]` (1 where this window gives the piece the most context on both
            sides); `window_index` int32 `[W]`; with an answer, also
            `start_positions`, `end_positions`, `is_impossible` int32 `[W]`.
        """
        length = self.sequence_length
        # Undecodable bytes -> U+FFFD, as the tokenizer does; the byte offsets point into this text.
        context = replace_undecodable_tf(tf.convert_to_tensor(context, tf.string))
        question = tf.convert_to_tensor(question, tf.string)
        passage = context
        if getattr(self.tokenizer, "lowercase", False):
            # ASCII-only lowercasing keeps every byte offset valid for the original passage.
            passage = tf.strings.lower(context)
        passage_ids, byte_starts, byte_ends = self._offset_tokenizer.tokenize_with_offsets(passage)
        byte_starts = tf.cast(byte_starts, tf.int32)
        byte_ends = tf.cast(byte_ends, tf.int32)
        num_pieces = tf.shape(passage_ids)[0]
        question_ids = tf.cast(self.tokenizer.tokenize(question), tf.int32)[: self.max_query_length]
        question_length = tf.shape(question_ids)[0]

        max_passage = length - 3 - question_length
        step = tf.minimum(self.doc_stride, max_passage)
        overflow = tf.maximum(num_pieces - max_passage, 0)
        num_windows = 1 + (overflow + step - 1) // step
        window_starts = tf.range(num_windows) * step  # [W]
        window_lengths = tf.minimum(max_passage, num_pieces - window_starts)  # [W]
        piece_index = tf.ragged.range(window_starts, window_starts + window_lengths)  # [W, None]
        window_pieces = tf.gather(passage_ids, piece_index)  # [W, None]
        questions = tf.RaggedTensor.from_tensor(
            tf.tile(question_ids[None, :], tf.stack([num_windows, 1])))  # [W, Q]
        features = self._packer((window_pieces, questions))
        position_piece = self._index_packer((piece_index, tf.ones_like(questions) * -1))["token_ids"]
        is_passage = position_piece >= 0  # [W, L]
        safe_piece = tf.maximum(position_piece, 0)
        is_cls = tf.tile(tf.one_hot(length - 1, length, dtype=tf.int32)[None, :],
                         tf.stack([num_windows, 1]))  # [W, L]
        features["answer_mask"] = tf.where(is_passage, 1, is_cls)
        features["piece_start_bytes"] = tf.where(is_passage, _gather_or_minus_one(byte_starts, safe_piece), -1)
        features["piece_end_bytes"] = tf.where(is_passage, _gather_or_minus_one(byte_ends, safe_piece), -1)
        features["token_is_max_context"] = self._max_context(
            window_starts, window_lengths, num_pieces, position_piece, is_passage)
        features["window_index"] = tf.range(num_windows)

        if answer_start is not None:
            features.update(self._labels(context, byte_starts, byte_ends, answer_start, answer_text,
                                         is_impossible, window_starts, window_lengths,
                                         question_length))
        return features

    def _max_context(self, window_starts, window_lengths, num_pieces, position_piece, is_passage):
        # Score of piece i in window w: min(left context, right context) + 0.01 * window length.
        pieces = tf.range(num_pieces)[None, :]  # [1, N]
        starts = window_starts[:, None]
        ends = (window_starts + window_lengths)[:, None]  # [W, 1]
        inside = tf.logical_and(pieces >= starts, pieces < ends)  # [W, N]
        score = (tf.cast(tf.minimum(pieces - starts, ends - 1 - pieces), tf.float32)
                 + 0.01 * tf.cast(window_lengths[:, None], tf.float32))
        score = tf.where(inside, score, -1e9)
        best_window = tf.argmax(score, axis=0, output_type=tf.int32)  # [N]
        window_of_position = tf.range(tf.shape(position_piece)[0])[:, None]  # [W, 1]
        best = _gather_or_minus_one(best_window, tf.maximum(position_piece, 0))  # [W, L]
        if_passage = tf.logical_and(is_passage, tf.equal(best, window_of_position))
        return tf.cast(if_passage, tf.int32)

    def _labels(self, context, byte_starts, byte_ends, answer_start, answer_text, is_impossible,
                window_starts, window_lengths, question_length):
        length = self.sequence_length
        answer_start = tf.cast(answer_start, tf.int32)
        answer_text = tf.convert_to_tensor("" if answer_text is None else answer_text, tf.string)
        prefix = tf.strings.substr(context, 0, tf.maximum(answer_start, 0), unit="UTF8_CHAR")
        first_byte = tf.strings.length(prefix)
        last_byte = first_byte + tf.strings.length(answer_text)  # exclusive
        impossible = tf.zeros([], tf.bool) if is_impossible is None else tf.cast(is_impossible, tf.bool)
        impossible = tf.logical_or(impossible, tf.strings.length(answer_text) == 0)
        start_piece = tf.reduce_sum(tf.cast(byte_ends <= first_byte, tf.int32))
        end_piece = tf.reduce_sum(tf.cast(byte_starts < last_byte, tf.int32)) - 1
        window_ends = window_starts + window_lengths
        contains = tf.logical_and(window_starts <= start_piece, end_piece < window_ends)
        contains = tf.logical_and(contains, tf.logical_not(impossible))
        contains = tf.logical_and(contains, end_piece >= start_piece)
        first_passage_position = length - (window_lengths + question_length + 3)  # [W]
        cls_position = tf.fill(tf.shape(window_starts), length - 1)
        start = tf.where(contains, first_passage_position + start_piece - window_starts, cls_position)
        end = tf.where(contains, first_passage_position + end_piece - window_starts, cls_position)
        return {"start_positions": start, "end_positions": end,
                "is_impossible": tf.cast(tf.logical_not(contains), tf.int32)}


def _gather_or_minus_one(values, indices):
    """`tf.gather(values, indices)` that also runs when `values` is empty (a passage of no pieces).

    The indices of non-passage positions are clamped to 0, which an empty `values` does
    not have: -1 is appended, and every such position is masked by the caller anyway.
    """
    return tf.gather(tf.concat([values, tf.constant([-1], values.dtype)], axis=0), indices)
