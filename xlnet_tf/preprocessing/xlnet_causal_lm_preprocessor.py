"""`XLNetCausalLMPreprocessor`: strings <-> the prompt ids of `XLNetCausalLM.generate`."""

import keras
from keras_hub.layers import StartEndPacker
from keras_hub.models import CausalLMPreprocessor

from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetCausalLMPreprocessor(CausalLMPreprocessor):
    """keras-hub's `CausalLMPreprocessor` for XLNet: no start or end token is added.

    A prompt is its SentencePiece ids as they are (XLNet's pretraining text has
    no `<s>` before a sentence), right-padded with `<pad>` to `sequence_length`
    with a `padding_mask`; `generate_postprocess` drops padding and special
    pieces and detokenizes.

    Args:
        tokenizer: an `XLNetTokenizer`.
        sequence_length: the default `max_length` of generation (prompt plus continuation).
        **kwargs: keras-hub `CausalLMPreprocessor` arguments.

    Call arguments:
        x: strings (`fit` on text; labels are the next tokens).

    Returns:
        `generate_preprocess`: `{"token_ids", "padding_mask"}` `[B, sequence_length]`;
        `generate_postprocess`: strings.

    Example:
    >>> from xlnet_tf import XLNetCausalLMPreprocessor, XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> preprocessor = XLNetCausalLMPreprocessor(tokenizer, sequence_length=8)
    >>> features = preprocessor.generate_preprocess(["the river"])
    >>> features["token_ids"].shape
    TensorShape([1, 8])
    """

    def __init__(self, tokenizer, sequence_length=128, add_start_token=False, add_end_token=False, **kwargs):
        super().__init__(tokenizer, sequence_length=sequence_length, add_start_token=add_start_token,
                         add_end_token=add_end_token, **kwargs)

    def build(self, input_shape):
        # keras-hub's packer would put `<s>` before every generation prompt whatever
        # `add_start_token` says; XLNet's prompts are their text's ids alone.
        self.packer = StartEndPacker(
            start_value=self.tokenizer.start_token_id if self.add_start_token else None,
            end_value=self.tokenizer.end_token_id if self.add_end_token else None,
            pad_value=self.tokenizer.pad_token_id, sequence_length=self.sequence_length,
            return_padding_mask=True)
        self.built = True

    # keras-hub's loader needs `tokenizer.json` and knows no preset names; `XLNetTokenizer.from_preset` reads
    # every preset layout, `spiece.model` alone included.
    @classmethod
    def from_preset(cls, preset, sequence_length=128, **kwargs):
        """The preprocessor of a preset's vocabulary (`XLNetTokenizer.from_preset`).

        Example:
        >>> from xlnet_tf import XLNetCausalLMPreprocessor
        >>> preprocessor = XLNetCausalLMPreprocessor.from_preset("xlnet_base_cased")
        """
        return cls(XLNetTokenizer.from_preset(preset), sequence_length=sequence_length, **kwargs)
