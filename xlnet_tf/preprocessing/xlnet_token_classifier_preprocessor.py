"""`XLNetTokenClassifierPreprocessor`: pre-split words (+ word labels) -> packed ids (+ piece labels)."""

import keras
import tensorflow as tf
from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function

from xlnet_tf.preprocessing.batch_size_check import same_row_lengths
from xlnet_tf.preprocessing.task_encoding import encode_words, word_label_packer
from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetTokenClassifierPreprocessor(XLNetPreprocessor):
    """Tokenizes each word and moves word labels onto pieces (NER-style).

    Each word is tokenized on its own (so it starts a new `▁` piece); the first
    piece of a word gets the word's label, its other pieces, `<sep>`, `<cls>`
    and padding get -100, which `XLNetTokenClassifier`'s default loss ignores.
    Pieces are packed as `[pad..] pieces <sep> <cls>`.

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: packed length L.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: words, a ragged (or dense) string tensor `[B, None]` or a list of word
            lists; or a packed dict.
        y: optional word labels, int `[B, None]` aligned with the words (one per word:
            other row lengths are an error naming the row).
        sample_weight: optional `[B]`.

    Returns:
        `x`: int32 `token_ids`, `segment_ids`, `padding_mask` `[B, L]`; `y`: int32 `[B, L]`
        piece labels (-100 where ignored).

    Example:
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> preprocessor = XLNetTokenClassifierPreprocessor(tokenizer, sequence_length=16)
    >>> x, y = preprocessor(tf.ragged.constant([["John", "lives", "here"]]),
    ...                     tf.ragged.constant([[1, 0, 0]]))
    """

    def __init__(self, tokenizer, sequence_length=512, **kwargs):
        kwargs.pop("truncate", None)
        kwargs.pop("second_max_length", None)
        super().__init__(tokenizer, sequence_length=sequence_length, **kwargs)
        self.label_packer = word_label_packer(self.packer)

    def get_config(self):
        config = super().get_config()
        config.pop("truncate", None)
        config.pop("second_max_length", None)
        return config

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if is_packed(x):
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        words = x
        if not isinstance(words, tf.RaggedTensor):
            words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words, tf.string))
        if words.shape.rank != 2:
            raise ValueError("XLNetTokenClassifierPreprocessor takes a batch of word lists ([batch, "
                             f"words] strings), got rank {words.shape.rank}.")
        if y is not None:
            y = y if isinstance(y, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(tf.convert_to_tensor(y))
            # One label per word, row by row: otherwise labels land on other rows' words. Word lists
            # from `tf.ragged.constant` have int64 row splits, Keras' batches int32 ones.
            words, y = words.with_row_splits_dtype(tf.int64), y.with_row_splits_dtype(tf.int64)
            checked = same_row_lengths(type(self).__name__, {"words": words, "labels": y})
            words, y = checked["words"], checked["labels"]
        x, y, _ = encode_words(self.tokenizer, self.packer, words, y, self.label_packer)  # [B, L]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
