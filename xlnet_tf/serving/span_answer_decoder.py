"""`SpanAnswerDecoder`: passages + questions -> answer text and character spans, inside the graph."""

import tensorflow as tf

from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor

WINDOW_KEYS = (
    "token_ids", "segment_ids", "padding_mask", "answer_mask",
    "piece_start_bytes", "piece_end_bytes", "token_is_max_context",
)
MODEL_KEYS = ("token_ids", "segment_ids", "padding_mask", "answer_mask")
NEG_INF = float("-inf")


class SpanAnswerDecoder(tf.Module):
    """SQuAD-style question answering for a serving signature, all in TensorFlow ops.

    For a batch of (passage, question) strings it
    1. cuts every example into `P <sep> Q <sep> <cls>` windows with
       `XLNetSquadPreprocessor` (document stride for long passages),
    2. runs the span labeler on all windows of the batch at once,
    3. picks, per example, the best (start, end) pair of the labeler's top-k
       beam over all windows (both ends passage pieces, start piece in its
       max-context window, end >= start, at most `max_answer_length` pieces; score
       = start + end log-probability; first best wins on ties) and the null score
       (minimum `cls_logits` over windows),
    4. cuts the answer from the passage by the pieces' byte offsets and returns it
       with its character span, stripped of surrounding whitespace.

    It is the in-graph twin of `xlnet_tf.preprocessing.squad_postprocessing.squad_best_answer`
    (same rules), so the SavedModel answers like the Python post-processing.

    Args:
        tokenizer: `xlnet_tf.preprocessing.xlnet_tokenizer.XLNetTokenizer`.
        sequence_length (int): window length L.
        max_query_length: question pieces kept.
        doc_stride: window step in passage pieces.
        max_answer_length: longest answer in pieces.
        null_score_threshold (float | None): None (always answer, SQuAD 1.1) or a float: empty answer
            when the null score is above it (SQuAD 2.0).

    Call arguments (`answer`):
        model: the `XLNetSpanLabeler`, or any callable `features -> outputs` running it
            in inference mode (top-k beam + `cls_logits`).
        context: `tf.string` `[B]`, passages (valid UTF-8).
        question: `tf.string` `[B]`.

    Returns:
        dict: `answer_text` string `[B]` ("" when unanswerable, when no pair of the
        beam is a valid span, or when the passage is empty or only whitespace),
        `answer_start`, `answer_end` int32 `[B]` (character offsets in the passage,
        end exclusive; -1 when empty), `score` float32 `[B]` (-inf when no valid
        span), `null_score` float32 `[B]` (+inf without windows), `num_windows` int32 `[B]`.

    Example:

    ```python
    import tensorflow as tf
    from xlnet_tf.serving import SpanAnswerDecoder
    from xlnet_tf import XLNetBackbone, XLNetSpanLabeler, XLNetTokenizer
    tokenizer = XLNetTokenizer("spiece.model")
    span_labeler = XLNetSpanLabeler(XLNetBackbone.from_preset("xlnet_base_cased"))
    decoder = SpanAnswerDecoder(tokenizer, sequence_length=384, max_query_length=64, doc_stride=128)
    decoder.answer(span_labeler, tf.constant(["The fox jumps."]), tf.constant(["Who jumps?"]))
    ```
    """

    def __init__(self, tokenizer, sequence_length, max_query_length=64, doc_stride=128,
                 max_answer_length=64, null_score_threshold=None, name=None):
        super().__init__(name=name)
        self.squad_preprocessor = XLNetSquadPreprocessor(
            tokenizer, sequence_length=sequence_length, max_query_length=max_query_length,
            doc_stride=doc_stride)
        # Tracked here so the SavedModel saves the SentencePiece resources it captures.
        self.tokenizer = tokenizer
        self.offset_tokenizer = self.squad_preprocessor._offset_tokenizer
        self.sequence_length = int(sequence_length)
        self.max_answer_length = int(max_answer_length)
        self.null_score_threshold = None if null_score_threshold is None else float(null_score_threshold)

    def windows(self, context, question):
        """All windows of a batch: dict of `[N, L]` tensors and `row_lengths` `[B]`."""
        batch = tf.shape(context)[0]
        arrays = {k: tf.TensorArray(tf.int32, size=batch, infer_shape=False,
                                    element_shape=tf.TensorShape([None, self.sequence_length]))
                  for k in WINDOW_KEYS}
        lengths = tf.TensorArray(tf.int32, size=batch)

        def body(i, arrays, lengths):
            example = self.squad_preprocessor(context[i], question[i])
            arrays = {k: arrays[k].write(i, example[k]) for k in WINDOW_KEYS}
            return i + 1, arrays, lengths.write(i, tf.shape(example["token_ids"])[0])

        _, arrays, lengths = tf.while_loop(lambda i, *_: i < batch, body, (0, arrays, lengths))
        empty = tf.zeros([0, self.sequence_length], tf.int32)
        # TensorArray.concat of zero elements has no shape to infer; an empty batch gets [0, L].
        flat = {k: tf.cond(batch > 0, lambda a=a: a.concat(), lambda: empty) for k, a in arrays.items()}
        flat = {k: tf.ensure_shape(v, [None, self.sequence_length]) for k, v in flat.items()}  # [N, L]
        row_lengths = tf.cond(batch > 0, lengths.stack, lambda: tf.zeros([0], tf.int32))  # [B]
        return flat, row_lengths

    def answer(self, model, context, question):
        # A passage with no pieces has no window to pack; give it a one-character
        # stand-in and answer "" for it (decided here, not by the model).
        blank = tf.equal(tf.strings.length(tf.strings.strip(context)), 0)  # [B]
        context = tf.where(blank, ".", context)
        features, row_lengths = self.windows(context, question)
        outputs = model({k: features[k] for k in MODEL_KEYS})
        return self.decode(context, features, row_lengths, outputs, blank=blank)

    def decode(self, context, features, row_lengths, outputs, blank=None):
        """Best answer per example from the windows' features and labeler outputs."""
        batch = tf.shape(row_lengths)[0]
        window_score, window_first, window_last = self._best_pair_per_window(features, outputs)
        example_of_window = tf.repeat(tf.range(batch), row_lengths)  # [N]
        best_score, best_window = _best_window_per_example(window_score, example_of_window, batch)
        first_byte = tf.gather(window_first, best_window)
        last_byte = tf.gather(window_last, best_window)
        null_score = tf.math.unsorted_segment_min(
            tf.cast(outputs["cls_logits"], tf.float32), example_of_window, batch)  # [B]
        # Likewise an example without windows gets +inf, not the largest finite float.
        null_score = tf.where(row_lengths > 0, null_score, float("inf"))

        found = tf.math.is_finite(best_score) & (row_lengths > 0)
        if blank is not None:
            found &= tf.logical_not(blank)
        if self.null_score_threshold is not None:
            found &= null_score <= self.null_score_threshold
        text, char_start, char_end = _cut(context, tf.maximum(first_byte, 0), tf.maximum(last_byte, 0))
        # An answer is empty exactly when its offsets are -1 (a span of whitespace included).
        found &= tf.strings.length(text) > 0
        return {
            "answer_text": tf.where(found, text, ""),
            "answer_start": tf.where(found, char_start, -1),
            "answer_end": tf.where(found, char_end, -1),
            "score": tf.where(row_lengths > 0, best_score, NEG_INF),
            "null_score": null_score,
            "num_windows": row_lengths,
        }

    def _best_pair_per_window(self, features, outputs):
        """Per window, the best valid (start, end) pair of the beam: its score and first and last bytes."""
        start_lp = tf.cast(outputs["start_top_log_probs"], tf.float32)  # [N, K1]
        start_ix = tf.cast(outputs["start_top_index"], tf.int32)  # [N, K1]
        num = tf.shape(start_lp)[0]
        k1 = tf.shape(start_lp)[1]
        end_lp = tf.reshape(tf.cast(outputs["end_top_log_probs"], tf.float32), [num, k1, -1])  # [N, K1, K2]
        end_ix = tf.reshape(tf.cast(outputs["end_top_index"], tf.int32), [num, k1, -1])  # [N, K1, K2]
        k2 = tf.shape(end_ix)[2]

        start_bytes = tf.gather(features["piece_start_bytes"], start_ix, batch_dims=1)  # [N, K1]
        start_max = tf.gather(features["token_is_max_context"], start_ix, batch_dims=1)  # [N, K1]
        end_bytes = tf.reshape(
            tf.gather(features["piece_end_bytes"], tf.reshape(end_ix, [num, -1]), batch_dims=1),
            [num, k1, k2])  # [N, K1, K2]
        valid = ((start_bytes >= 0) & (start_max > 0))[:, :, None]  # [N, K1, 1]
        valid &= (end_bytes >= 0) & (end_ix >= start_ix[:, :, None])
        valid &= end_ix - start_ix[:, :, None] + 1 <= self.max_answer_length
        score = tf.where(valid, start_lp[:, :, None] + end_lp, NEG_INF)  # [N, K1, K2]
        flat_score = tf.reshape(score, [num, -1])  # [N, K1*K2]
        best_pair = tf.argmax(flat_score, axis=1, output_type=tf.int32)  # [N]
        window_score = tf.gather(flat_score, best_pair, batch_dims=1)  # [N]
        window_first = tf.gather(start_bytes, best_pair // k2, batch_dims=1)  # [N]
        window_last = tf.gather(tf.reshape(end_bytes, [num, -1]), best_pair, batch_dims=1)  # [N]
        return window_score, window_first, window_last


def _best_window_per_example(window_score, example_of_window, batch):
    """Per example, the best score over its windows (-inf without a valid pair) and the first window reaching it."""
    num = tf.shape(window_score)[0]
    best_score = tf.math.unsorted_segment_max(window_score, example_of_window, batch)  # [B]
    # unsorted_segment_max starts from the lowest finite float, not -inf, so an example
    # whose beam holds no valid pair would score -3.4e38; it gets -inf, as in the Python rule.
    window_has_pair = tf.cast(tf.math.is_finite(window_score), tf.int32)  # [N]: -inf = no valid pair
    has_pair = tf.math.unsorted_segment_max(window_has_pair, example_of_window, batch) > 0  # [B]
    best_score = tf.where(has_pair, best_score, NEG_INF)
    # First window reaching the best score (the Python loop keeps the first strict maximum).
    position = tf.range(num)
    is_best = tf.equal(window_score, tf.gather(best_score, example_of_window))
    best_window = tf.math.unsorted_segment_min(
        tf.where(is_best, position, num), example_of_window, batch)  # [B]
    best_window = tf.minimum(best_window, tf.maximum(num - 1, 0))
    return best_score, best_window


def _char_length(byte_prefix):
    # Dropping a trailing partial character counts only whole characters.
    whole = tf.strings.unicode_transcode(byte_prefix, "UTF-8", "UTF-8", errors="ignore")
    return tf.strings.length(whole, unit="UTF8_CHAR"), tf.strings.length(whole)


def _cut(context, first_byte, last_byte):
    """Text between two byte offsets, widened to whole characters, whitespace stripped."""
    char_start, _ = _char_length(tf.strings.substr(context, tf.zeros_like(first_byte), first_byte))
    char_end, whole_bytes = _char_length(tf.strings.substr(context, tf.zeros_like(last_byte), last_byte))
    # A piece ending inside a multi-byte character takes the whole character.
    char_end += tf.cast(whole_bytes < last_byte, tf.int32)
    length = tf.maximum(char_end - char_start, 0)
    text = tf.strings.substr(context, char_start, length, unit="UTF8_CHAR")
    stripped = tf.strings.strip(text)
    # Leading whitespace = what strip removes when a sentinel protects the end.
    lead = tf.strings.length(text, unit="UTF8_CHAR") + 1 - tf.strings.length(
        tf.strings.strip(text + "#"), unit="UTF8_CHAR")
    char_start += lead
    return stripped, char_start, char_start + tf.strings.length(stripped, unit="UTF8_CHAR")
