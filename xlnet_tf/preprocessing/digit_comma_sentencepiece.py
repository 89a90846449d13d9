"""`DigitCommaSentencepiece`: tensorflow-text SentencePiece followed by XLNet's digit-comma rule."""

import tensorflow as tf

from xlnet_tf.preprocessing.digit_comma_split import DigitCommaSplit


class DigitCommaSentencepiece(tf.Module):
    """`tensorflow_text.SentencepieceTokenizer` with the original XLNet piece splitting.

    Drop-in for the tensorflow-text tokenizer (`tokenize`,
    `tokenize_with_offsets`, `detokenize`): the ids are SentencePiece's, then
    `DigitCommaSplit` splits pieces like `▁1990,` as the released models
    expect. Being a `tf.Module`, it keeps the SentencePiece resource tracked, so
    SavedModels that call it save it; the rule itself is core TensorFlow ops and
    constants.

    Args:
        proto: serialized SentencePiece model (`bytes`).
        out_type: `tf.int32`, `tf.int64` or `tf.string` (pieces).
        split: `DigitCommaSplit` for `proto` (built when None), or False to
            run SentencePiece alone.
        name: module name.

    Example:
    >>> sp = DigitCommaSentencepiece(open("spiece.model", "rb").read())
    >>> sp.tokenize(tf.constant(["in 1990, the"]))   # [B, (P)] ids, `▁1990` and `,` apart
    """

    def __init__(self, proto, out_type=tf.int32, split=None, name=None):
        import tensorflow_text as tf_text

        super().__init__(name=name)
        self.out_type = tf.as_dtype(out_type)
        self._ids = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)
        # Pieces need a second SentencePiece op: ids tell which pieces the rule splits.
        self._pieces = (tf_text.SentencepieceTokenizer(model=proto, out_type=tf.string)
                        if self.out_type == tf.string else None)
        if split is None:
            split = DigitCommaSplit.from_proto(proto)
        self._split = split or None

    def tokenize(self, inputs):
        """Ids (or pieces) of a `tf.string` scalar `[P]` or batch `[B, (P)]`."""
        ids = self._ids.tokenize(inputs)
        if self._pieces is not None:
            pieces = self._pieces.tokenize(inputs)
            return pieces if self._split is None else self._split.split_tf(ids, pieces)
        if self._split is not None:
            ids = self._split.split_tf(ids)
        return tf.cast(ids, self.out_type)

    def tokenize_with_offsets(self, inputs):
        """`(ids, start_bytes, end_bytes)`, the split pieces' offsets into `inputs`."""
        if self._pieces is not None:
            raise ValueError("DigitCommaSentencepiece.tokenize_with_offsets returns ids; build it with an "
                             "integer out_type.")
        ids, starts, ends = self._ids.tokenize_with_offsets(inputs)
        if self._split is not None:
            ids, starts, ends = self._split.split_with_offsets_tf(inputs, ids, starts, ends)
        return tf.cast(ids, self.out_type), starts, ends

    def detokenize(self, input):  # noqa: A002 - tensorflow-text's argument name
        """Text of ids (or pieces); the split pieces decode to the same text."""
        return self._ids.detokenize(input)

    def vocab_size(self):
        return self._ids.vocab_size()

    def id_to_string(self, input):  # noqa: A002
        return self._ids.id_to_string(input)

    def string_to_id(self, input):  # noqa: A002
        return self._ids.string_to_id(input)
