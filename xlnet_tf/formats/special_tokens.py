"""The special pieces of XLNet's vocabulary and their ids.

The released XLNet vocabularies and every vocabulary `xlnet-tf vocab` trains put
the nine special pieces first, at ids 0..8. Readers, packers, exports and the Beam
jobs take the ids from here (or from a records manifest, which writes the same
mapping), so no id is spelled twice.

Example:
    >>> from xlnet_tf.formats import special_tokens
    >>> special_tokens.CLS_TOKEN_ID, special_tokens.SPECIAL_PIECES[special_tokens.CLS_TOKEN_ID]
    (3, '<cls>')
"""

UNK_TOKEN = "<unk>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
CLS_TOKEN = "<cls>"
SEP_TOKEN = "<sep>"
PAD_TOKEN = "<pad>"
MASK_TOKEN = "<mask>"
EOD_TOKEN = "<eod>"
EOP_TOKEN = "<eop>"

# Piece `SPECIAL_PIECES[i]` has id i: the order is the vocabulary's.
SPECIAL_PIECES = (
    UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, CLS_TOKEN, SEP_TOKEN, PAD_TOKEN, MASK_TOKEN, EOD_TOKEN, EOP_TOKEN,
)

UNK_TOKEN_ID = SPECIAL_PIECES.index(UNK_TOKEN)
BOS_TOKEN_ID = SPECIAL_PIECES.index(BOS_TOKEN)
EOS_TOKEN_ID = SPECIAL_PIECES.index(EOS_TOKEN)
CLS_TOKEN_ID = SPECIAL_PIECES.index(CLS_TOKEN)
SEP_TOKEN_ID = SPECIAL_PIECES.index(SEP_TOKEN)
PAD_TOKEN_ID = SPECIAL_PIECES.index(PAD_TOKEN)
MASK_TOKEN_ID = SPECIAL_PIECES.index(MASK_TOKEN)
EOD_TOKEN_ID = SPECIAL_PIECES.index(EOD_TOKEN)
EOP_TOKEN_ID = SPECIAL_PIECES.index(EOP_TOKEN)

# The mapping written into pretraining manifests (`vocabulary.special_ids`) and returned by
# `XLNetTokenizer.special_ids`: short name -> id. The short names are part of the
# on-disk format, so they stay as they are.
SPECIAL_TOKEN_IDS = {
    "unk": UNK_TOKEN_ID, "bos": BOS_TOKEN_ID, "eos": EOS_TOKEN_ID, "cls": CLS_TOKEN_ID,
    "sep": SEP_TOKEN_ID, "pad": PAD_TOKEN_ID, "mask": MASK_TOKEN_ID, "eod": EOD_TOKEN_ID,
    "eop": EOP_TOKEN_ID,
}

# SentencePiece training: `<unk>`, `<s>`, `</s>` get their ids from `unk_id`/`bos_id`/`eos_id`;
# these five are control symbols (never produced by encoding text), and `<eop>` is a
# user-defined symbol so that text containing it still encodes to it, as in the release.
CONTROL_SYMBOLS = (CLS_TOKEN, SEP_TOKEN, PAD_TOKEN, MASK_TOKEN, EOD_TOKEN)
USER_DEFINED_SYMBOLS = (EOP_TOKEN,)
