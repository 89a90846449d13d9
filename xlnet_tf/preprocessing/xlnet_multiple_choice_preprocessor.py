"""`XLNetMultipleChoicePreprocessor`: context, question and choices -> `[B, C, L]` (`[B, C, S, L]`) packed ids."""

import keras
from xlnet_tf.tensorflow_required import tensorflow as tf
from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function

from xlnet_tf.preprocessing.batch_size_check import same_batch_size
from xlnet_tf.preprocessing.task_encoding import encode_choices
from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetMultipleChoicePreprocessor(XLNetPreprocessor):
    """Packs every choice as `context <sep> question+choice <sep> <cls>` (the original RACE recipe).

    A cloze question (holding `_`) gets the choice in its blank, any other question
    is followed by a space and the choice (`task_encoding.question_with_option`).

    Truncation `keep_second`: the question + choice keeps its last
    `second_max_length` pieces, then the context keeps its first pieces that fit.

    With `max_segments` S > 1 (long contexts, for a backbone with recurrence
    memory) every choice is packed the same way at `S * sequence_length` pieces
    and cut into S segments of `sequence_length`
    (`xlnet_tf.preprocessing.segment_layout`).

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: packed length L of each choice (of each segment).
        second_max_length: cap on the question + choice pieces (original RACE: 128).
        max_segments: segments per choice (1: the single-window layout).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a dict `{"context": [B] str, "question": [B] str, "choices": [B, C] str}`
            (C the same for the whole dataset; `context`, `question` and `choices` with
            different batch sizes are an error naming them), or a packed dict.
        y: optional int `[B]`, the index of the right choice.
        sample_weight: optional `[B]`.

    Returns:
        `x`: int32 `token_ids`, `segment_ids`, `padding_mask` `[B, C, L]` (`[B, C, S, L]` when
        `max_segments` > 1); `y`, `sample_weight` unchanged.

    Example:
    >>> from xlnet_tf import XLNetMultipleChoicePreprocessor, XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> preprocessor = XLNetMultipleChoicePreprocessor(tokenizer, sequence_length=32)
    >>> preprocessor({"context": ["The sky is blue."], "question": ["Its colour?"],
    ...               "choices": [["blue", "red"]]})["token_ids"].shape
    TensorShape([1, 2, 32])
    """

    def __init__(self, tokenizer, sequence_length=512, second_max_length=128, max_segments=1, **kwargs):
        kwargs.pop("truncate", None)
        super().__init__(tokenizer, sequence_length=sequence_length, truncate="keep_second",
                         second_max_length=second_max_length, **kwargs)
        self._set_max_segments(max_segments)

    def get_config(self):
        config = super().get_config()
        config.pop("truncate", None)
        config["max_segments"] = self.max_segments
        return config

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if not is_packed(x):
            if not isinstance(x, dict) or not {"context", "question", "choices"} <= set(x):
                raise ValueError("XLNetMultipleChoicePreprocessor takes x = {'context': ..., 'question': "
                                 f"..., 'choices': ...}}; "
                                 f"got {sorted(x) if isinstance(x, dict) else type(x).__name__}.")
            choices = tf.convert_to_tensor(x["choices"], tf.string)
            if choices.shape.rank != 2:
                raise ValueError("XLNetMultipleChoicePreprocessor: 'choices' must be [batch, num_choices] "
                                 f"strings, got shape {choices.shape}.")
            num_choices = choices.shape[1] if choices.shape[1] is not None else tf.shape(choices)[1]
            # One context and question per row of choices: a single context would broadcast.
            inputs = same_batch_size(type(self).__name__, {
                "context": tf.reshape(tf.convert_to_tensor(x["context"], tf.string), [-1]),
                "question": tf.reshape(tf.convert_to_tensor(x["question"], tf.string), [-1]),
                "choices": choices})
            packer = self.document_packer if self.max_segments > 1 else self.packer
            packed, _ = encode_choices(self.tokenizer, packer, inputs["context"], inputs["question"],
                                       inputs["choices"])  # [B*C, S*L]
            shape = [-1, num_choices, self.sequence_length]
            if self.max_segments > 1:
                shape = [-1, num_choices, self.max_segments, self.sequence_length]
            x = {k: tf.reshape(v, shape) for k, v in packed.items()}  # [B, C, L] or [B, C, S, L]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
