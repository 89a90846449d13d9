"""`DigitCommaSentencepiece`: tensorflow-text SentencePiece followed by XLNet's digit-comma rule."""

import functools
import uuid

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

    The SentencePiece model lives under its own shared name
    (`SurvivingSentencepieceModel`), not in the op's kernel: tensorflow-text's
    default resource belongs to the kernel, and `tf.random.set_seed` (so
    `keras.utils.set_random_seed`) clears TensorFlow's kernel cache, which
    deleted the model of every tokenizer built before it.

    Args:
        proto: serialized SentencePiece model (`bytes`).
        out_type: `tf.int32`, `tf.int64` or `tf.string` (pieces).
        split: `DigitCommaSplit` for `proto` (built when None), or False to
            run SentencePiece alone.
        name: module name.

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.preprocessing.digit_comma_sentencepiece import DigitCommaSentencepiece
    >>> sp = DigitCommaSentencepiece(open("spiece.model", "rb").read())
    >>> sp.tokenize(tf.constant(["in 1990, the"]))   # [B, (P)] ids, `▁1990` and `,` apart
    """

    def __init__(self, proto, out_type=tf.int32, split=None, name=None):
        super().__init__(name=name)
        self.out_type = tf.as_dtype(out_type)
        self._ids = _sentencepiece_tokenizer(proto, tf.int32)
        # Pieces need a second SentencePiece op: ids tell which pieces the rule splits.
        self._pieces = (_sentencepiece_tokenizer(proto, tf.string)
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


class SurvivingSentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """A SentencePiece model resource that outlives TensorFlow's kernel cache.

    tensorflow-text creates its model with the `SentencepieceOp` kernel as owner (no shared
    name), so clearing the kernel cache, which `tf.random.set_seed` does, deletes it and later
    calls fail with `NotFoundError: ... SentencepieceResource does not exist`. With a shared
    name unique to this object the resource manager keeps it until this object is destroyed
    (`DestroyResourceOp`). A SavedModel gets its own unique name, traced in, and its loaded copies
    never destroy it (two loads of one SavedModel share the same, identical model).

    Args:
        model: serialized SentencePiece model (`bytes` or a scalar `tf.string`).

    Example:
    >>> import keras
    >>> from xlnet_tf.preprocessing.digit_comma_sentencepiece import SurvivingSentencepieceModel
    >>> model = SurvivingSentencepieceModel(open("spiece.model", "rb").read())
    >>> keras.utils.set_random_seed(0)
    >>> gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(model.resource_handle, ...)  # still there
    """

    def __init__(self, model):
        super().__init__()
        self._model = model
        self._owned_handle = None
        _ = self.resource_handle  # created now, eagerly, like tensorflow-text's

    def _create_resource(self):
        # import time: loaded when a tokenizer first runs in-graph
        from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

        handle = gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=f"xlnet_tf_sentencepiece_{uuid.uuid4().hex}")
        if tf.executing_eagerly() and self._owned_handle is None:
            self._owned_handle = handle
        return handle

    def _destroy_resource(self):
        # Only the eager owner deletes: the traced destroyer of a SavedModel does nothing, and
        # the copy `tf.saved_model.save` makes of this object never owns the handle.
        handle = self.__dict__.get("_owned_handle")
        if handle is not None and tf.executing_eagerly() and handle is self._resource_handle:
            self._owned_handle = None
            tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)


def _sentencepiece_tokenizer(proto, out_type):
    """A tensorflow-text `SentencepieceTokenizer` (default options) on a `SurvivingSentencepieceModel`."""
    return _tokenizer_class()(proto, out_type)


@functools.cache
def _tokenizer_class():
    import tensorflow_text as tf_text  # import time: loaded when a tokenizer first runs in-graph

    class SentencepieceTokenizer(tf_text.SentencepieceTokenizer):
        def __init__(self, proto, out_type):
            # What tensorflow-text's constructor sets, but not its kernel-owned model.
            super(tf_text.SentencepieceTokenizer, self).__init__()
            self.nbest_size, self.alpha, self.out_type = 0, 1.0, out_type
            self.reverse = self.add_bos = self.add_eos = self.return_nbest = False
            self._model_resource = SurvivingSentencepieceModel(proto)

    return SentencepieceTokenizer
