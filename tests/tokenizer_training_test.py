"""train_vocabulary / `xlnet-tf vocab`: special ids, options, bad inputs."""

import os

import pytest
import sentencepiece as spm

from xlnet_tf import tokenizer_training
from xlnet_tf.cli import vocab
from xlnet_tf.text_normalization import split_long_line
from xlnet_tf.preprocessing.xlnet_tokenizer import SPECIAL_PIECES
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.tokenizer_training import VocabularyTrainingError
from xlnet_tf.tokenizer_training import train_vocabulary

WORDS = "Alpha beta gamma delta stone river light water tree green small big house road".split()


def _write_corpus(path, num_documents=40, seed=0, extra=b""):
    import random

    rng = random.Random(seed)
    docs = []
    for _ in range(num_documents):
        docs.append("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "."
                              for _ in range(rng.randint(2, 5))))
    data = ("\n\n".join(docs) + "\n").encode("utf-8") + extra
    path.write_bytes(data)
    return str(path)


def _pieces(model_path):
    processor = spm.SentencePieceProcessor(model_file=model_path)
    return [processor.id_to_piece(i) for i in range(processor.vocab_size())]


def test_special_ids_match_released_vocabulary(tmp_path):
    corpus = _write_corpus(tmp_path / "a.txt")
    result = train_vocabulary(corpus, 40, tmp_path / "spiece.model", num_threads=1, character_coverage=1.0)
    pieces = _pieces(str(tmp_path / "spiece.model"))
    assert pieces[:9] == list(SPECIAL_PIECES)
    assert pieces[9:17] == list(tokenizer_training.DEFAULT_EXTRA_SYMBOLS)
    assert result["vocabulary_size"] == len(pieces) == 40
    assert result["files"] == [corpus]
    # The result loads in the tokenizer (which re-checks ids 0..8).
    tokenizer = XLNetTokenizer(str(tmp_path / "spiece.model"))
    assert tokenizer.detokenize(tokenizer("Alpha beta.")) == "Alpha beta."
    assert 8 in list(tokenizer("stone <eop> tree"))


def test_reproducible_with_one_thread(tmp_path):
    corpus = _write_corpus(tmp_path / "a.txt")
    train_vocabulary(corpus, 40, tmp_path / "one.model", num_threads=1, seed=3)
    train_vocabulary(corpus, 40, tmp_path / "two.model", num_threads=1, seed=3)
    assert (tmp_path / "one.model").read_bytes() == (tmp_path / "two.model").read_bytes()


def test_options_lowercase_and_no_extra_symbols(tmp_path):
    corpus = _write_corpus(tmp_path / "a.txt")
    train_vocabulary(corpus, 35, tmp_path / "m.model", lowercase=True, extra_symbols=(), num_threads=1)
    pieces = _pieces(str(tmp_path / "m.model"))
    assert pieces[:9] == list(SPECIAL_PIECES)
    assert "\u20ac" not in pieces  # no user-defined punctuation after <eop>
    assert not any(ch.isupper() for piece in pieces[9:] for ch in piece)


def test_glob_undecodable_lines_and_blank_lines(tmp_path):
    _write_corpus(tmp_path / "a.txt", seed=1)
    _write_corpus(tmp_path / "b.txt", seed=2, extra=b"bad \xff\xfe bytes\n\n\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    result = train_vocabulary(str(tmp_path / "*.txt"), 40, tmp_path / "m.model", num_threads=1)
    assert len(result["files"]) == 3
    assert result["undecodable_lines"] == 1
    with open(tmp_path / "a.txt", encoding="utf-8") as fa, open(tmp_path / "b.txt", "rb") as fb:
        nonblank = sum(1 for line in fa if line.strip()) + sum(1 for line in fb if line.strip()) - 1
    assert result["sentences"] == nonblank


def test_long_line_is_split_not_dropped(tmp_path):
    path = tmp_path / "long.txt"
    long_line = " ".join(["stone river light"] * 3000)
    path.write_text(long_line + "\n" + "tree green.\n", encoding="utf-8")
    result = train_vocabulary(str(path), 30, tmp_path / "m.model", max_sentence_chars=1000, num_threads=1,
                              hard_vocab_limit=False)
    assert result["sentences"] == 1 + len(split_long_line(long_line, 1000)) == 1 + 55


def test_missing_input_is_named(tmp_path):
    with pytest.raises(VocabularyTrainingError, match=r"'.*nowhere/\*\.txt' matches no file"):
        train_vocabulary(str(tmp_path / "nowhere" / "*.txt"), 40, tmp_path / "m.model")


def test_one_file_given_twice_is_refused_naming_both_spellings(tmp_path, monkeypatch, capsys):
    # The Beam jobs' rule: `a.txt` and `./a.txt` are one file, whose sentences would count twice.
    monkeypatch.chdir(tmp_path)
    _write_corpus(tmp_path / "a.txt")
    code = vocab.main(["--input", "a.txt", "./a.txt", "--vocab-size", "40", "--output", "m.model"])
    assert code == 2
    assert ("Input file 'a.txt' and './a.txt' are the same file, so its contents would be read twice"
            in capsys.readouterr().err)
    with pytest.raises(VocabularyTrainingError, match=r"'\./a\.txt' \(matched by '\./\*\.txt'\) are the same"):
        train_vocabulary(["a.txt", "./*.txt"], 40, "m.model")
    assert not os.path.exists("m.model")


def test_no_text_is_a_clear_error(tmp_path):
    (tmp_path / "blank.txt").write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(VocabularyTrainingError, match="No text to train on"):
        train_vocabulary(str(tmp_path / "blank.txt"), 40, tmp_path / "m.model")


def test_bad_settings(tmp_path):
    corpus = _write_corpus(tmp_path / "a.txt")
    with pytest.raises(VocabularyTrainingError, match="vocab_size=12 leaves no room"):
        train_vocabulary(corpus, 12, tmp_path / "m.model")
    with pytest.raises(VocabularyTrainingError, match="character_coverage"):
        train_vocabulary(corpus, 40, tmp_path / "m.model", character_coverage=1.5)
    with pytest.raises(VocabularyTrainingError, match="collides"):
        train_vocabulary(corpus, 40, tmp_path / "m.model", extra_symbols=("<cls>",))


def test_cli_main(tmp_path, capsys):
    _write_corpus(tmp_path / "a.txt", seed=1)
    _write_corpus(tmp_path / "b.txt", seed=2)
    output = tmp_path / "out" / "spiece.model"
    code = vocab.main(["--input", str(tmp_path / "*.txt"), "--vocab-size", "40", "--output", str(output),
                                    "--num-threads", "1", "--character-coverage", "1.0"])
    assert code == 0
    assert _pieces(str(output))[:9] == list(SPECIAL_PIECES)
    assert "40 pieces" in capsys.readouterr().out
    code = vocab.main(["--input", str(tmp_path / "missing.txt"), "--vocab-size", "40",
                                    "--output", str(output)])
    assert code == 2
    assert "missing.txt' does not exist." in capsys.readouterr().err
    assert os.path.exists(output)


def test_vocabulary_smaller_than_the_alphabet_is_a_clear_error(tmp_path):
    corpus = tmp_path / "letters.txt"
    corpus.write_text(" ".join("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"), encoding="utf-8")
    with pytest.raises(VocabularyTrainingError, match="vocab_size 20 cannot hold every character"):
        train_vocabulary(str(corpus), 20, tmp_path / "m.model")
    assert not os.path.exists(tmp_path / "m.model")
