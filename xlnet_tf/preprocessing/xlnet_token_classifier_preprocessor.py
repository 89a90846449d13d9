"""`XLNetTokenClassifierPreprocessor`: pre-split words (+ word labels) -> packed ids (+ piece labels).

`word_lists` is the one reading of its raw input, a batch of word lists: the model's
`fit`/`predict` call it on Python lists (ragged ones included) before building their data
set, the preprocessor on the tensors it is given.
"""

import keras
import numpy as np
from xlnet_tf.tensorflow_required import tensorflow as tf

from xlnet_tf.preprocessing.batch_size_check import same_row_lengths
from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function
from xlnet_tf.preprocessing.string_inputs import describe_input
from xlnet_tf.preprocessing.task_encoding import encode_words, ragged_ids, word_label_packer
from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed

WORD_LISTS = 'word lists, one list of words per sentence (e.g. [["New", "York"], ["Paris"]])'


def word_lists(words, owner):
    """A batch of word lists as a ragged string tensor `[B, (W)]`, or an error saying what is expected.

    Python lists (rows of different lengths, empty rows included) become a
    `tf.RaggedTensor`, a blank word (`""`, only spaces) refused there; a ragged
    string tensor passes as it is; a dense string tensor or array `[B, W]` drops
    the trailing `""` of each row (the padding of word lists stored dense). A
    string or a flat list of strings (sentences, not words) is refused with how
    to split it. A `tf.data` element spec is checked alike and returned as it is.

    Args:
        words: Python lists of `str`, a numpy string array, a (ragged) string
            tensor, or its `tf.TensorSpec` / `tf.RaggedTensorSpec`.
        owner: who reads them, first word of the messages.

    Returns:
        A string `tf.RaggedTensor` `[B, (W)]` (a spec: `words`).

    Raises:
        ValueError: `words` is not a batch of word lists.

    Example:
    >>> from xlnet_tf.preprocessing.xlnet_token_classifier_preprocessor import word_lists
    >>> word_lists([["New", "York"], ["Paris"]], "demo").to_list()
    [[b'New', b'York'], [b'Paris']]
    """
    if isinstance(words, (str, bytes, list, tuple)):
        return _python_word_lists(words, owner)
    if isinstance(words, np.ndarray):
        words = tf.convert_to_tensor(words)
    shape = tf.TensorShape(getattr(words, "shape", None))
    if shape.rank is not None and shape.rank < 2 and getattr(words, "dtype", None) == tf.string:
        raise _sentences_error(owner, describe_input(words))
    if shape.rank != 2 or (words.dtype != tf.string and shape.num_elements() != 0):
        raise ValueError(f"{owner} takes {WORD_LISTS}: strings [batch, words]; got {describe_input(words)}.")
    if isinstance(words, (tf.RaggedTensor, tf.TypeSpec)):
        return words
    if words.dtype != tf.string:  # No word at all (numpy reads [[], []] as floats).
        words = tf.fill(tf.shape(words), "")
    return tf.RaggedTensor.from_tensor(words, padding="")


def _sentences_error(owner, got):
    return ValueError(f"{owner} takes {WORD_LISTS}; got {got}. Split each sentence into its words "
                      "first, e.g. [sentence.split() for sentence in sentences].")


def _python_word_lists(words, owner):
    if isinstance(words, (str, bytes)):
        raise _sentences_error(owner, describe_input(words))
    for row, sentence in enumerate(words):
        if isinstance(sentence, (str, bytes)):
            raise _sentences_error(owner, f"{describe_input(words)} (x[{row}] is {sentence[:40]!r})")
        if not isinstance(sentence, (list, tuple, np.ndarray)):
            raise ValueError(f"{owner} takes {WORD_LISTS}; x[{row}] is {describe_input(sentence)}.")
        for column, word in enumerate(sentence):
            if not isinstance(word, (str, bytes)):
                raise ValueError(f"{owner} takes {WORD_LISTS}; x[{row}][{column}] is {describe_input(word)}, "
                                 "not a word.")
            if not word.strip():  # The common case of a word without pieces, refused before tokenizing.
                raise ValueError(f"{_no_piece_message(owner)} {word!r} at x[{row}][{column}] gives none.")
    return tf.ragged.constant([list(sentence) for sentence in words], dtype=tf.string, ragged_rank=1)


def _dense_width(words):
    """The static width W of dense words `[B, W]`, else None (ragged, or not known when tracing)."""
    shape = None if isinstance(words, (tf.RaggedTensor, list, tuple)) else getattr(words, "shape", None)
    return shape[1] if shape is not None and len(shape) == 2 and shape[1] is not None else None


def _word_labels(labels, words, dense_width):
    """Word labels as a ragged tensor; dense labels as wide as dense words keep the words' row lengths."""
    if isinstance(labels, tf.RaggedTensor):
        return labels
    labels = tf.convert_to_tensor(labels)
    if dense_width is not None and labels.shape.rank == 2 and labels.shape[1] == dense_width:
        return tf.RaggedTensor.from_tensor(labels, lengths=words.row_lengths())
    return tf.RaggedTensor.from_tensor(labels)


def _every_word_tokenized(owner, tokenizer, words):
    """`tokenizer` for `encode_words`, refusing a word that gives no piece.

    Such a word (`""`, only spaces or invisible characters) gets no position: its
    label would be dropped and the predictions of the words after it, read from the
    first piece of each word, would shift by one.
    """
    def tokenize(flat_words):  # [N] -> [N, (P)]
        pieces = ragged_ids(tokenizer(flat_words))
        if not isinstance(pieces, tf.RaggedTensor):  # No word in the batch: an eager tokenizer returns [].
            pieces = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        empty = tf.equal(pieces.row_lengths(), 0)  # [N]
        message = _no_piece_message(owner)
        if tf.executing_eagerly():
            found = np.flatnonzero(empty.numpy())
            if found.size:
                row, column = _row_and_column(words, int(found[0]))
                raise ValueError(f"{message} {flat_words[int(found[0])].numpy()!r} at x[{row}][{column}] gives none.")
            return pieces
        first = tf.argmax(tf.cast(empty, tf.int32))
        row, column = _row_and_column(words, first)
        check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(empty)),
                                    [message, flat_words[first], "at row", row, "column", column, "gives none."])
        with tf.control_dependencies([check]):
            return pieces.with_flat_values(tf.identity(pieces.flat_values))
    return tokenize


def _no_piece_message(owner):
    return f"{owner}: every word must give at least one piece (drop empty or blank words); the word"


def _row_and_column(words, index):
    row = tf.gather(words.value_rowids(), index)
    column = tf.cast(index, words.row_splits.dtype) - tf.gather(words.row_splits, row)
    return (int(row), int(column)) if tf.executing_eagerly() else (row, column)


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
        x: words, a ragged (or dense, trailing `""` as padding) string tensor `[B, None]`
            or a list of word lists; or a packed dict. Every word must give at least one
            piece (`""` or a blank word is an error naming its row and column).
        y: optional word labels, int `[B, None]` aligned with the words (one per word:
            other row lengths are an error naming the row).
        sample_weight: optional `[B]`.

    Returns:
        `x`: int32 `token_ids`, `segment_ids`, `padding_mask` `[B, L]`; `y`: int32 `[B, L]`
        piece labels (-100 where ignored).

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf import XLNetTokenClassifierPreprocessor, XLNetTokenizer
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
        owner = type(self).__name__
        words = word_lists(x, owner)
        if y is not None:
            y = _word_labels(y, words, _dense_width(x))
            # One label per word, row by row: otherwise labels land on other rows' words. Word lists
            # from `tf.ragged.constant` have int64 row splits, Keras' batches int32 ones.
            words, y = words.with_row_splits_dtype(tf.int64), y.with_row_splits_dtype(tf.int64)
            checked = same_row_lengths(type(self).__name__, {"words": words, "labels": y})
            words, y = checked["words"], checked["labels"]
        tokenize = _every_word_tokenized(owner, self.tokenizer, words)
        x, y, _ = encode_words(tokenize, self.packer, words, y, self.label_packer)  # [B, L]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
