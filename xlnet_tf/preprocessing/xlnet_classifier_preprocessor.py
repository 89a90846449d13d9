"""`XLNetClassifierPreprocessor`: raw text (single or pairs) -> packed ids for `XLNetClassifier`."""

import keras
from keras_hub.src.utils.tensor_utils import preprocessing_function

from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetClassifierPreprocessor(XLNetPreprocessor):
    """Tokenizes and packs text for sequence classification and regression.

    `x` is a batch of strings, or a tuple `(text_a, text_b)` of two batches
    (pairs; call `preprocessor(x=(a, b))`, since a lone tuple argument reads as
    `(x, y)` as everywhere in keras-hub), packed as `[pad..] A <sep> [B <sep>] <cls>` (`XLNetPacker`,
    original `longest_first` truncation). Labels (`y`, class ids or
    regression targets) and sample weights pass through unchanged; so does an
    `x` that is already a dict of packed ids.

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: packed length.
        truncate: `"longest_first"` (default) or `"keep_second"`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: string tensor/list `[B]`, a tuple of two of them, or a packed dict.
        y: optional labels `[B]`.
        sample_weight: optional `[B]`.

    Returns:
        `x` as a dict of int32 `token_ids`, `segment_ids`, `padding_mask` `[B, L]`,
        packed with `y` and `sample_weight` (`keras.utils.pack_x_y_sample_weight`).

    Example:
    >>> preprocessor = XLNetClassifierPreprocessor(tokenizer, sequence_length=16)
    >>> preprocessor(["A quiet river."])["token_ids"].shape
    TensorShape([1, 16])
    >>> ds = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8).map(preprocessor)
    """

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if not is_packed(x):
            segments = x if isinstance(x, tuple) else (x,)
            if not 1 <= len(segments) <= 2:
                raise ValueError("XLNetClassifierPreprocessor takes one text or a pair (text_a, "
                                 f"text_b); got a tuple of {len(segments)}.")
            x = self.packer(tuple(self.tokenize(segment) for segment in segments))
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
