"""XLNetTokenizer gives the original XLNet ids (`prepro_utils.encode_ids`), eagerly, in graphs and in SavedModels.

The reference below is the original algorithm written out again: `preprocess_text`,
SentencePiece's pieces, then the "digit," piece splitting, then `PieceToId`.
"""

import os
import random
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from xlnet_tf.serving.signature_custom_ops import signature_custom_ops
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.tokenizer_training import train_vocabulary

TINY_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")
UNDERLINE = "\u2581"
TF_TEXT_OPS = {"NormalizeUTF8", "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp"}


# ----------------------------------------------------------------------------- the original algorithm


def reference_preprocess(text, lower, keep_accents):
    text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if lower else text


def reference_pieces(sp, text):
    new_pieces = []
    for piece in sp.EncodeAsPieces(text):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur = sp.EncodeAsPieces(piece[:-1].replace(UNDERLINE, ""))
            if piece[0] != UNDERLINE and cur[0][0] == UNDERLINE:
                cur = cur[1:] if len(cur[0]) == 1 else [cur[0][1:]] + cur[1:]
            cur.append(piece[-1])
            new_pieces.extend(cur)
        else:
            new_pieces.append(piece)
    return new_pieces


def reference_ids(sp, text, lower=False, keep_accents=False):
    return [sp.PieceToId(p) for p in reference_pieces(sp, reference_preprocess(text, lower, keep_accents))]


# ----------------------------------------------------------------------------- inputs

WORDS = ("the year river market rose to in by about total people city was of and population million "
         "dollars km").split()
NUMBERS = ("1990,", "3,", "1,000,000", "1,000,", "2001,", "12,500", "7,", "(1990,", "x12,", "1990,,", "45,6",
           "\uff11\uff19\uff19\uff10\uff0c", "\u00b2,", "\u2460,", "\u0661\u0662,", "3,000,000,")
OTHER = ("Caf\u00e9", "na\u00efve", "\u00c5ngstr\u00f6m", "\u00c9COLE", "\u4e2d\u6587", "\u65e5\u672c\u8a9e",
         "\ud55c\uad6d\uc5b4", "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F1EB\U0001F1F7", "!!!", "...", ",,,",
         "?!,", "--", "``quoted''", "\u041f\u0440\u0438\u0432\u0435\u0442", "\u0645\u0631\u062d\u0628\u0627",
         "\u05e9\u05dc\u05d5\u05dd", "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac", "<eop>")
SEPARATORS = (" ", " ", " ", "", "  ", "\t", "\u00a0", "\u3000", "\n ", ", ")


def generated_strings(count, seed=0):
    rng = random.Random(seed)
    out = ["", " ", "  \t "]
    while len(out) < count:
        parts = []
        for _ in range(rng.randint(1, 9)):
            kind = rng.random()
            if kind < 0.35:
                parts.append(rng.choice(NUMBERS) if rng.random() < 0.6 else f"{rng.randint(0, 10**7):,},")
            elif kind < 0.7:
                parts.append(rng.choice(WORDS))
            else:
                parts.append(rng.choice(OTHER))
            parts.append(rng.choice(SEPARATORS))
        text = "".join(parts)
        out.append(text if rng.random() > 0.1 else " " + text.upper() + "  ")
    return out


STRINGS = generated_strings(3000)


@pytest.fixture(scope="module")
def comma_vocabulary(tmp_path_factory):
    """A vocabulary whose corpus is full of numbers with commas, so `▁1990,`-like pieces exist."""
    root = tmp_path_factory.mktemp("comma_vocab")
    rng = random.Random(1)
    lines = []
    for _ in range(4000):
        words = [rng.choice(("1990,", "3,", "1,000,", "2001,", "12,500,", "90,", "1,000,000", "7,"))
                 if rng.random() < 0.3 else rng.choice(WORDS) for _ in range(8)]
        lines.append(" ".join(words) + ("" if rng.random() < 0.5 else " x" + rng.choice(("90,", "12,", "1,"))))
    (root / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = str(root / "comma.model")
    train_vocabulary(str(root / "corpus.txt"), 160, path, num_threads=1, hard_vocab_limit=False,
                     character_coverage=1.0)
    return path


def _as_lists(ragged):
    return [list(map(int, row)) for row in ragged.to_list()]


CASES = [("tiny", {}), ("comma", {}), ("comma", {"lowercase": True, "keep_accents": True})]


@pytest.mark.parametrize("vocab,options", CASES, ids=["tiny", "comma", "comma_lower_accents"])
def test_ids_match_the_original_eagerly_and_in_graph(vocab, options, comma_vocabulary):
    path = TINY_MODEL if vocab == "tiny" else comma_vocabulary
    sp = spm.SentencePieceProcessor(model_file=path)
    lower, keep = options.get("lowercase", False), options.get("keep_accents", False)
    expected = [reference_ids(sp, s, lower, keep) for s in STRINGS]
    tokenizer = XLNetTokenizer(path, **options)

    if vocab == "comma":
        # The rule must actually fire: those strings' ids differ from plain SentencePiece.
        plain = [sp.encode(reference_preprocess(s, lower, keep)) for s in STRINGS]
        fired = sum(p != e for p, e in zip(plain, expected))
        assert fired > 300, fired
        assert tokenizer.digit_comma_split().fires
    assert _as_lists(tf.ragged.constant(tokenizer(STRINGS), dtype=tf.int32)) == expected
    assert [list(tokenizer(s)) for s in STRINGS[:200]] == expected[:200]  # unbatched eager calls

    graph = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert _as_lists(graph(tf.constant(STRINGS))) == expected
    dataset = tf.data.Dataset.from_tensor_slices(STRINGS).batch(500).map(tokenizer)
    assert [row for batch in dataset for row in _as_lists(batch)] == expected
    scalar = tf.data.Dataset.from_tensor_slices(STRINGS[:100]).map(tokenizer)
    assert [list(map(int, x)) for x in scalar] == expected[:100]

    # The Beam pretraining job's path: `DigitCommaSplit.encode` on normalized text.
    from xlnet_tf.text_normalization import normalize_text

    normalized = [normalize_text(s, lowercase=lower, keep_accents=keep) for s in STRINGS]
    split = tokenizer.digit_comma_split()
    assert split.encode(sp, normalized) == expected
    # Its batched form: lines normalized together, the rule on one flat id array.
    from xlnet_tf.text_normalization import normalize_lines

    lines = [s.replace("\n", " ") for s in STRINGS]
    batch = sp.encode(normalize_lines(lines, lowercase=lower, keep_accents=keep))
    flat, lengths = split.split_flat(np.concatenate([np.array(x, np.int32) for x in batch]),
                                     np.array([len(x) for x in batch]))
    assert flat.dtype == np.int32 and lengths.sum() == flat.size
    assert [row.tolist() for row in np.split(flat, np.cumsum(lengths)[:-1])] == [
        reference_ids(sp, s, lower, keep) for s in lines]


def test_dense_and_piece_outputs_match_the_original(comma_vocabulary):
    sp = spm.SentencePieceProcessor(model_file=comma_vocabulary)
    texts = STRINGS[:400]
    length = 12
    expected = [(reference_ids(sp, s) + [5] * length)[:length] for s in texts]
    dense = XLNetTokenizer(comma_vocabulary, sequence_length=length)
    assert np.asarray(dense(texts)).tolist() == expected
    assert tf.function(dense.tokenize)(tf.constant(texts)).numpy().tolist() == expected

    pieces = XLNetTokenizer(comma_vocabulary, dtype="string")
    want = [reference_pieces(sp, reference_preprocess(s, False, False)) for s in texts]
    assert pieces(texts) == want
    graph = tf.function(pieces.tokenize)(tf.constant(texts)).to_list()
    assert [[p.decode("utf-8") for p in row] for row in graph] == want
    # Detokenizing is unaffected: the split pieces decode to the same text.
    ids = XLNetTokenizer(comma_vocabulary)(texts)
    assert XLNetTokenizer(comma_vocabulary, split_digit_comma=False).detokenize(ids) == dense.detokenize(
        [np.asarray(sp.encode(reference_preprocess(s, False, False))) for s in texts])


def test_option_off_keeps_sentencepiece_segmentation_and_round_trips(comma_vocabulary):
    sp = spm.SentencePieceProcessor(model_file=comma_vocabulary)
    text = "in 1990, the 3, rose"
    off = XLNetTokenizer(comma_vocabulary, split_digit_comma=False)
    assert list(off(text)) == sp.encode(text)
    assert list(tf.function(off.tokenize)(tf.constant(text)).numpy()) == sp.encode(text)
    on = XLNetTokenizer(comma_vocabulary)
    assert list(on(text)) == reference_ids(sp, text) != sp.encode(text)
    assert on.get_config()["split_digit_comma"] is True
    restored = XLNetTokenizer.from_config(off.get_config())
    assert restored.split_digit_comma is False and list(restored(text)) == sp.encode(text)


def test_saved_model_ids_match_the_original_and_use_only_sentencepiece_ops(comma_vocabulary, tmp_path):
    sp = spm.SentencePieceProcessor(model_file=comma_vocabulary)
    expected = [reference_ids(sp, s) for s in STRINGS]
    module = tf.Module()
    module.tokenizer = XLNetTokenizer(comma_vocabulary)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        ids = module.tokenizer(text)  # [B, (L)]
        return {"ids": ids.to_tensor(-1), "lengths": ids.row_lengths()}

    module.serve = serve
    path = str(tmp_path / "tokenizer_savedmodel")
    tf.saved_model.save(module, path, signatures={"serving_default": serve})
    ops = signature_custom_ops(path)
    assert set(ops["serving_default"]) <= TF_TEXT_OPS and set(ops["<any>"]) <= TF_TEXT_OPS

    out = tf.saved_model.load(path).signatures["serving_default"](tf.constant(STRINGS))
    got = [row[:n] for row, n in zip(out["ids"].numpy().tolist(), out["lengths"].numpy().tolist())]
    assert got == expected


def test_offsets_of_split_pieces_point_at_their_text(comma_vocabulary):
    from xlnet_tf.preprocessing.digit_comma_sentencepiece import DigitCommaSentencepiece

    sp = spm.SentencePieceProcessor(model_file=comma_vocabulary)
    with open(comma_vocabulary, "rb") as f:
        offsets = DigitCommaSentencepiece(f.read())
    texts = [s for s in STRINGS if s.isascii() and "  " not in s and "\t" not in s and "\n" not in s][:300]
    ids, starts, ends = offsets.tokenize_with_offsets(tf.constant(texts))
    assert _as_lists(ids) == [[sp.PieceToId(p) for p in reference_pieces(sp, s)] for s in texts]
    pieces = [reference_pieces(sp, s) for s in texts]
    for text, row_pieces, row_starts, row_ends in zip(texts, pieces, starts.to_list(), ends.to_list()):
        for piece, start, end in zip(row_pieces, row_starts, row_ends):
            surface = text.encode("utf-8")[start:end].decode("utf-8")
            # A leading "▁" stands for a space, or for nothing at the start of the text.
            assert surface in (piece.replace(UNDERLINE, " "), piece.replace(UNDERLINE, "")), (text, piece, surface)
    # The scalar form (the SQuAD passage path) gives the same.
    one = offsets.tokenize_with_offsets(tf.constant(texts[3]))
    assert [x.numpy().tolist() for x in one] == [ids[3].numpy().tolist(), starts[3].numpy().tolist(),
                                                 ends[3].numpy().tolist()]


def test_squad_passages_use_the_split_pieces_and_answers_keep_exact_offsets(comma_vocabulary):
    from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor

    sp = spm.SentencePieceProcessor(model_file=comma_vocabulary)
    context = "the market rose in 1990, to about 12,500, people"
    pre = XLNetSquadPreprocessor(XLNetTokenizer(comma_vocabulary), sequence_length=64, max_query_length=8)
    out = pre(tf.constant(context), tf.constant("which year?"), answer_start=context.index("1990"),
              answer_text=tf.constant("1990"))
    passage = [sp.PieceToId(p) for p in reference_pieces(sp, context)]
    ids = out["token_ids"][0].numpy().tolist()
    assert ids[ids.index(4) - len(passage):ids.index(4)] == passage  # P <sep> Q <sep> <cls>, left padded
    start, end = int(out["start_positions"][0]), int(out["end_positions"][0])
    first, last = int(out["piece_start_bytes"][0, start]), int(out["piece_end_bytes"][0, end])
    assert context.encode("utf-8")[first:last].decode("utf-8").strip() == "1990"
