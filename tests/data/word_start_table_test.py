"""`word_start_table`: the original XLNet's word-start rule, with the apostrophe it meant to include."""

import string

from xlnet_tf.data.plm_sampling import word_start_table


def _original_is_start_piece(piece):
    # The original's `_is_start_piece`, as released: `\"` stands where `'` was meant.
    special_pieces = set('!"#$%&\"()*+,-./:;?@[\\]^_`{|}~')
    return piece.startswith(("\u2581", "<")) or piece in special_pieces


def test_only_the_apostrophe_differs_from_the_original():
    pieces = ["\u2581the", "re", "<sep>", "<0x41>", "a", "1", "\u2581", "''", *string.punctuation]
    ours = word_start_table(pieces)
    differing = [p for p, start in zip(pieces, ours) if start != _original_is_start_piece(p)]
    assert differing == ["'"]
    assert ours[pieces.index("'")] and not _original_is_start_piece("'")
    assert ours.tolist()[:8] == [True, False, True, True, False, False, True, False]
