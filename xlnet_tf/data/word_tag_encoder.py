"""`word_tag_encoder`: word-level tags -> packed SentencePiece features and per-piece labels.

Shared by the fine-tuning reader (`xlnet_tf.data.finetuning`) and the Beam job that
writes token-classification records (`xlnet_tf.pipelines.finetuning_data`), so both
label a piece the same way: a word's tag on its first piece, `IGNORE_LABEL` on the
other pieces, on `<sep>`, `<cls>` and padding.
"""

import tensorflow as tf

from xlnet_tf.formats.finetuning_records import IGNORE_LABEL
from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID, PAD_TOKEN_ID, SEP_TOKEN_ID
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker


def word_tag_encoder(tokenizer, sequence_length, truncate="longest_first"):
    """Returns `encode(batch) -> (features, labels)` for batches of tagged words.

    Args:
        tokenizer: an `XLNetTokenizer` (word strings -> piece ids).
        sequence_length: the packed length (`A <sep> <cls>`, left-padded).
        truncate: the `XLNetPacker` truncation rule.

    Returns:
        A function of `{"tokens": string [B, (W)], "tags": int32 [B, (W)]}` returning the
        packer's features (`token_ids`, `segment_ids`, `padding_mask`, each [B, L]) and
        int32 labels [B, L].

    Example:
    >>> encode = word_tag_encoder(tokenizer, sequence_length=16)  # doctest: +SKIP
    >>> features, labels = encode({"tokens": words, "tags": tags})  # doctest: +SKIP
    """
    packer = XLNetPacker(sequence_length, sep_token_id=SEP_TOKEN_ID, cls_token_id=CLS_TOKEN_ID,
                         pad_token_id=PAD_TOKEN_ID, truncate=truncate)
    # Packs the label sequence like the ids, with every added position ignored by the loss.
    label_packer = XLNetPacker(sequence_length, sep_token_id=IGNORE_LABEL, cls_token_id=IGNORE_LABEL,
                               pad_token_id=IGNORE_LABEL, truncate=truncate)

    def encode(batch):
        words = batch["tokens"]  # [B, (W)]
        pieces = tokenizer(words.flat_values)  # [N_words, (P)]
        first_piece = tf.ragged.range(pieces.row_lengths()) == 0
        word_tags = tf.repeat(batch["tags"].flat_values, pieces.row_lengths())
        tags = pieces.with_values(tf.where(first_piece.flat_values, word_tags, IGNORE_LABEL))
        per_example = lambda x: tf.RaggedTensor.from_row_splits(  # noqa: E731
            x.values, tf.gather(x.row_splits, words.row_splits))  # [B, (pieces)]
        features = packer(per_example(pieces))
        return features, label_packer(per_example(tags))["token_ids"]
    return encode
