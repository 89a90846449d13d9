"""`XLNetClassifierPreprocessor`: raw text (single or pairs) -> packed ids for `XLNetClassifier`."""

import keras
from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function

from xlnet_tf.preprocessing.batch_size_check import same_batch_size
from xlnet_tf.preprocessing.segment_layout import to_segments
from xlnet_tf.preprocessing.task_encoding import encode_text
from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetClassifierPreprocessor(XLNetPreprocessor):
    """Tokenizes and packs text for sequence classification and regression.

    `x` is a batch of strings, or a tuple `(text_a, text_b)` of two batches of
    the same size (pairs; call `preprocessor(x=(a, b))`, since a lone tuple argument reads as
    `(x, y)` as everywhere in keras-hub; batches of different sizes are an error
    naming both), packed as `[pad..] A <sep> [B <sep>] <cls>` (`XLNetPacker`,
    original `longest_first` truncation). Labels (`y`, class ids or
    regression targets) and sample weights pass through unchanged; so does an
    `x` that is already a dict of packed ids.

    With `max_segments` S > 1 (long documents, for a backbone with recurrence
    memory) the text is packed the same way at `S * sequence_length` pieces and
    cut into S segments of `sequence_length` (`xlnet_tf.preprocessing.segment_layout`):
    a short text gives S - 1 all-padding segments followed by the single-window
    packing; a longer one keeps its first `S * sequence_length - 2` pieces.

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: packed length of one segment.
        truncate: `"longest_first"` (default) or `"keep_second"`.
        second_max_length (int | None): `XLNetPacker.second_max_length` (for `"keep_second"`).
        max_segments: segments per example (1: the single-window layout).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: string tensor/list `[B]`, a tuple of two of them, or a packed dict.
        y: optional labels `[B]`.
        sample_weight: optional `[B]`.

    Returns:
        `x` as a dict of int32 `token_ids`, `segment_ids`, `padding_mask` `[B, L]`
        (`[B, S, L]` when `max_segments` > 1), packed with `y` and `sample_weight`
        (`keras.utils.pack_x_y_sample_weight`).

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf import XLNetClassifierPreprocessor, XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> preprocessor = XLNetClassifierPreprocessor(tokenizer, sequence_length=16)
    >>> preprocessor(["A quiet river."])["token_ids"].shape
    TensorShape([1, 16])
    >>> long = XLNetClassifierPreprocessor(tokenizer, sequence_length=16, max_segments=3)
    >>> long(["A quiet river."])["token_ids"].shape
    TensorShape([1, 3, 16])
    >>> texts, labels = ["A quiet river.", "A loud one."], [1, 0]
    >>> ds = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8).map(preprocessor)
    """

    def __init__(self, tokenizer, sequence_length=512, truncate="longest_first", second_max_length=None,
                 max_segments=1, **kwargs):
        super().__init__(tokenizer, sequence_length=sequence_length, truncate=truncate,
                         second_max_length=second_max_length, **kwargs)
        self._set_max_segments(max_segments)

    def get_config(self):
        config = super().get_config()
        config["max_segments"] = self.max_segments
        return config

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if not is_packed(x):
            segments = x if isinstance(x, tuple) else (x,)
            if not 1 <= len(segments) <= 2:
                raise ValueError("XLNetClassifierPreprocessor takes one text or a pair (text_a, "
                                 f"text_b); got a tuple of {len(segments)}.")
            if len(segments) == 2:
                segments = tuple(same_batch_size(type(self).__name__, {
                    "text_a": segments[0], "text_b": segments[1]}).values())
            packer = self.document_packer if self.max_segments > 1 else self.packer
            x, _ = encode_text(self.tokenizer, packer, segments)  # [B, S*L]
            x = to_segments(x, self.max_segments, self.sequence_length)  # [B, S, L] when S > 1
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
