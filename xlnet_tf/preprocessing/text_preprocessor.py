"""`TextPreprocessor`: raw strings -> packed XLNet inputs, inside a SavedModel graph."""

import tensorflow as tf

from xlnet_tf.preprocessing.task_encoding import encode_text, ragged_ids


class TextPreprocessor(tf.Module):
    """Tokenizer + `XLNetPacker` as one trackable module for serving signatures.

    Being a `tf.Module`, it makes the tokenizer's SentencePiece resource part of
    the SavedModel. Truncation is the packer's (`XLNetPacker`): a single text
    keeps its first `sequence_length - 2` pieces; a pair is cut longest-first
    (or `keep_second`), then `<sep>`/`<cls>` are added and the row is padded on
    the left.

    Args:
        tokenizer: an `xlnet_tf.preprocessing.xlnet_tokenizer.XLNetTokenizer` (any callable returning
            ragged int ids `[B, None]` for a `[B]` string tensor works).
        packer: an `xlnet_tf.preprocessing.xlnet_packer.XLNetPacker`.

    Call arguments:
        text: `tf.string` `[B]`.
        text_pair: optional `tf.string` `[B]`.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, each `[B, L]`.

    Example:

    ```python
    import tensorflow as tf
    from xlnet_tf.serving import TextPreprocessor
    from xlnet_tf import XLNetPacker, XLNetTokenizer
    pre = TextPreprocessor(XLNetTokenizer("spiece.model"), XLNetPacker(128))
    pre(tf.constant(["a fine film"]))["token_ids"].shape  # [1, 128]
    ```
    """

    def __init__(self, tokenizer, packer, name=None):
        super().__init__(name=name)
        self.tokenizer = tokenizer
        self.packer = packer
        self.sequence_length = int(packer.sequence_length)

    def tokenize(self, text):
        # The keras-hub tokenizer's `tokenize`, not its call: `XLNetTokenizer.__call__` is the same op.
        return ragged_ids(self.tokenizer.tokenize(text))  # [B, None]

    def __call__(self, text, text_pair=None):
        texts = [text] if text_pair is None else [text, text_pair]
        return encode_text(self.tokenize, self.packer, texts)[0]  # [B, L]
