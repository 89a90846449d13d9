"""The one encoding of each fine-tuning input: raw example -> packed features.

Every path that turns text into model inputs calls these functions: the tf.data reader
(`xlnet_tf.data.finetuning`), the keras-hub preprocessors (`xlnet_tf.preprocessing.*_preprocessor`),
the Beam job (`xlnet_tf.beam.finetuning_data`) and the SavedModel's text signature
(`xlnet_tf.serving.task_serving_module`). So the same example gives the same ids in training,
`fit` on strings, prepared records and serving. SQuAD windows have their own class,
`XLNetSquadPreprocessor`, which every path calls as well.

All functions are TensorFlow ops only (tf.data-mappable, traceable into a SavedModel) and take a
`tokenizer` (any callable of a string tensor: an `XLNetTokenizer`, whose eager call returns lists,
or a `TextPreprocessor.tokenize`) and an `XLNetPacker`.

Example:
>>> import tensorflow as tf
>>> from xlnet_tf import XLNetPacker
>>> from xlnet_tf.preprocessing.task_encoding import encode_text
>>> packer = XLNetPacker(16)  # doctest: +SKIP
>>> features, pieces = encode_text(tokenizer, packer, [tf.constant(["A quiet river."])])  # doctest: +SKIP
>>> features["token_ids"].shape  # doctest: +SKIP
TensorShape([1, 16])
"""

from xlnet_tf.tensorflow_required import tensorflow as tf

from xlnet_tf.formats.finetuning_records import IGNORE_LABEL
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker


def ragged_ids(ids):
    """Token ids as a ragged int32 tensor `[N, None]` with int64 row splits, whatever the tokenizer returned.

    The ids of one text (a scalar string in) stay a dense int32 `[P]`.

    An eager `XLNetTokenizer` call runs Python SentencePiece and returns lists; a dense
    tensor comes from tokenizers that pad. The row splits are int64, the dtype
    `tf.ragged.constant` gives word lists, so pieces and words combine without a cast.
    """
    if isinstance(ids, (list, tuple)):
        if not (ids and isinstance(ids[0], (list, tuple))):
            return tf.constant(ids, tf.int32)  # one text: [P]
        ids = tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)
    elif not isinstance(ids, tf.RaggedTensor):
        ids = tf.convert_to_tensor(ids)
        if ids.shape.rank == 1:
            return tf.cast(ids, tf.int32)
        ids = tf.RaggedTensor.from_tensor(ids)
    return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)


def tokenize_texts(tokenizer, texts):
    """Pieces of one or more `[B_i]` string tensors, with one tokenizer call (one SentencePiece op).

    Returns:
        A list of ragged int32 `[B_i, None]`, one per text.
    """
    texts = [tf.convert_to_tensor(text, tf.string) for text in texts]
    if len(texts) == 1 or any(text.shape.rank == 0 for text in texts) or tf.executing_eagerly():
        # One example (scalar strings) keeps its dense `[P]` pieces, as the packer takes them; an
        # eager call reports undecodable text per input (the tokenizer warns once per call).
        return [ragged_ids(tokenizer(text)) for text in texts]
    ends = tf.cumsum([tf.shape(text)[0] for text in texts])
    both = ragged_ids(tokenizer(tf.concat(texts, axis=0)))  # [sum of B, None]
    return [both[(ends[i - 1] if i else 0):ends[i]] for i in range(len(texts))]


def encode_text(tokenizer, packer, texts):
    """A text or a pair -> `[pad..] A <sep> [B <sep>] <cls>`.

    Args:
        tokenizer: a callable of a `[B]` string tensor.
        packer: an `XLNetPacker` (its length may be `max_segments * L`: a long document).
        texts: a sequence of one or two `[B]` string tensors (A, then B).

    Returns:
        `(features, pieces)`: the packer's int32 `[B, L]` dict and each text's pieces
        (for `segment_layout.truncated_rows`).
    """
    pieces = tokenize_texts(tokenizer, texts)
    return packer(tuple(pieces)), pieces  # [B, L]


def question_with_option(question, option):
    """The second segment of a multiple-choice row: the option in the question's blanks, as the original RACE code.

    A cloze question (holding `_`) gets the option in place of every `_`; any other
    question is followed by a space and the option.

    Args:
        question: string tensor `[N]`.
        option: string tensor `[N]`.

    Returns:
        String tensor `[N]`.

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.preprocessing.task_encoding import question_with_option
    >>> question_with_option(tf.constant(["The sky is _ today."]), tf.constant(["blue"]))  # doctest: +SKIP
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'The sky is blue today.'], dtype=object)>
    """
    parts = tf.strings.split(question, "_")  # [N, (P)]
    last = tf.ragged.range(parts.row_lengths()) + 1 == tf.expand_dims(parts.row_lengths(), 1)  # [N, (P)]
    # Every part but the last is followed by the option: question.replace("_", option).
    values = tf.where(last.flat_values, parts.flat_values,
                      tf.strings.join([parts.flat_values, tf.gather(option, parts.value_rowids())]))
    filled = tf.strings.reduce_join(parts.with_flat_values(values), axis=1)  # [N]
    appended = tf.strings.join([question, option], separator=" ")
    return tf.where(parts.row_lengths() > 1, filled, appended)


def encode_choices(tokenizer, packer, context, question, choices):
    """Each choice of a question -> `context <sep> question+choice <sep> <cls>` (the RACE layout).

    Args:
        tokenizer: a callable of a `[B]` string tensor.
        packer: an `XLNetPacker`, usually `keep_second` truncation.
        context: string `[B]`.
        question: string `[B]`.
        choices: string `[B, C]`.

    Returns:
        `(features, pieces)`: int32 `[B * C, L]` rows, choice-major within an example,
        and the two segments' pieces `[B * C, None]`.
    """
    choices = tf.convert_to_tensor(choices, tf.string)
    num_choices = tf.shape(choices)[1]
    rows = tf.repeat(tf.range(tf.shape(choices)[0]), num_choices)  # [B*C]
    questions = tf.gather(tf.reshape(question, [-1]), rows)  # [B*C]
    seconds = question_with_option(questions, tf.reshape(choices, [-1]))  # [B*C]
    contexts, seconds = tokenize_texts(tokenizer, [context, seconds])
    contexts = tf.gather(contexts, rows)  # [B*C, None]: each context tokenized once
    return packer((contexts, seconds)), [contexts, seconds]  # [B*C, L]


def word_label_packer(packer):
    """The packer of piece labels next to `packer`: every position it adds carries `IGNORE_LABEL`."""
    return XLNetPacker(packer.sequence_length, sep_token_id=IGNORE_LABEL, cls_token_id=IGNORE_LABEL,
                       pad_token_id=IGNORE_LABEL, truncate=packer.truncate, name="label_packer")


def encode_words(tokenizer, packer, words, tags=None, label_packer=None):
    """Word lists (+ word tags) -> packed pieces (+ piece labels: a word's tag on its first piece).

    Each word is tokenized on its own (so it starts a new `▁` piece); its other
    pieces, `<sep>`, `<cls>` and padding get `IGNORE_LABEL`.

    Args:
        tokenizer: a callable of a `[N]` string tensor.
        packer: an `XLNetPacker`.
        words: ragged string `[B, (W)]`, row splits int32 or int64.
        tags: optional int `[B, (W)]`, one per word.
        label_packer: `word_label_packer(packer)`; built here when None.

    Returns:
        `(features, labels, pieces)`: the packer's int32 `[B, L]` dict, int32 labels
        `[B, L]` (None without `tags`) and each example's pieces `[B, None]`.
    """
    words = words.with_row_splits_dtype(tf.int64)
    pieces = ragged_ids(tokenizer(words.flat_values))  # [N_words, (P)]
    splits = tf.gather(pieces.row_splits, words.row_splits)
    example_pieces = tf.RaggedTensor.from_row_splits(pieces.flat_values, splits)  # [B, (pieces)]
    features = packer(example_pieces)  # [B, L]
    if tags is None:
        return features, None, example_pieces
    first_piece = tf.equal(tf.ragged.range(pieces.row_lengths()).flat_values, 0)  # [N_pieces]
    word_tags = tf.repeat(tf.cast(tags.flat_values, tf.int32), pieces.row_lengths())
    piece_tags = tf.RaggedTensor.from_row_splits(tf.where(first_piece, word_tags, IGNORE_LABEL), splits)
    labels = (label_packer or word_label_packer(packer))(piece_tags)["token_ids"]  # [B, L]
    return features, labels, example_pieces


def split_words(text):
    """A `[B]` string tensor -> ragged `[B, (W)]` words split on whitespace (serving's word lists)."""
    return tf.strings.split(tf.reshape(text, [-1]))
