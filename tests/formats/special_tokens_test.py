"""The special pieces and ids: the released layout, one consistent spelling."""

import os

import sentencepiece as spm

from xlnet_tf.formats import special_tokens

TINY_VOCABULARY = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")


def test_released_ids():
    # The released XLNet vocabulary's layout, pinned literally.
    assert special_tokens.SPECIAL_PIECES == (
        "<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>")
    ids = (special_tokens.UNK_TOKEN_ID, special_tokens.BOS_TOKEN_ID, special_tokens.EOS_TOKEN_ID,
           special_tokens.CLS_TOKEN_ID, special_tokens.SEP_TOKEN_ID, special_tokens.PAD_TOKEN_ID,
           special_tokens.MASK_TOKEN_ID, special_tokens.EOD_TOKEN_ID, special_tokens.EOP_TOKEN_ID)
    assert ids == tuple(range(9))


def test_pieces_and_ids_agree():
    pieces = (special_tokens.UNK_TOKEN, special_tokens.BOS_TOKEN, special_tokens.EOS_TOKEN,
              special_tokens.CLS_TOKEN, special_tokens.SEP_TOKEN, special_tokens.PAD_TOKEN,
              special_tokens.MASK_TOKEN, special_tokens.EOD_TOKEN, special_tokens.EOP_TOKEN)
    assert pieces == special_tokens.SPECIAL_PIECES
    for name, token_id in special_tokens.SPECIAL_TOKEN_IDS.items():
        assert getattr(special_tokens, f"{name.upper()}_TOKEN_ID") == token_id
    assert sorted(special_tokens.SPECIAL_TOKEN_IDS.values()) == list(range(9))


def test_training_symbols_cover_the_pieces_sentencepiece_does_not_own():
    own = {special_tokens.UNK_TOKEN, special_tokens.BOS_TOKEN, special_tokens.EOS_TOKEN}
    reserved = set(special_tokens.CONTROL_SYMBOLS) | set(special_tokens.USER_DEFINED_SYMBOLS)
    assert not own & reserved
    assert own | reserved == set(special_tokens.SPECIAL_PIECES)


def test_a_trained_vocabulary_has_the_layout():
    processor = spm.SentencePieceProcessor(model_file=TINY_VOCABULARY)
    assert [processor.id_to_piece(i) for i in range(9)] == list(special_tokens.SPECIAL_PIECES)
    for piece in special_tokens.CONTROL_SYMBOLS:
        assert processor.is_control(processor.piece_to_id(piece))
