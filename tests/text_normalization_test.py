"""Text normalization: Python and in-graph versions agree; long-line splitting."""

import sys
import unicodedata

import pytest
import tensorflow as tf

from xlnet_tf import text_normalization
from xlnet_tf.text_normalization import normalize_lines
from xlnet_tf.text_normalization import normalize_text
from xlnet_tf.text_normalization import normalize_text_tf
from xlnet_tf.text_normalization import split_long_line

TRICKY = [
    "",
    "   ",
    "plain ascii text",
    "  lead\t\ttabs\nnew\u00a0line\u2003em\u3000ideo\x1cfs\x85nel  ",
    "``latex'' quotes and ''' and ``` runs",
    "Caf\u00e9 na\u00efve \u00c5ngstr\u00f6m r\u00e9sum\u00e9",
    "\u212b \uff21\uff22\uff23 \ufb01 ligature \u2460",
    "combining only: \u0301\u0302 e\u0301",
    "hindi \u0915\u093f\u0924\u093e\u092c \u0928\u0941\u092e\u093e",  # vowel signs with combining class 0 stay
    "\u00c9COLE MIXED Case",
    "emoji \U0001f600 and \U00010400",
]


def test_whitespace_table_is_pythons():
    spaces = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    matched = {ch for ch in spaces if text_normalization._WHITESPACE_RE.fullmatch(ch)}
    assert matched == spaces
    assert not text_normalization._WHITESPACE_RE.search("a\u200bb")  # zero-width space is not whitespace


def test_combining_ranges_cover_exactly_pythons_combining_set():
    covered = {c for first, last in text_normalization.combining_ranges() for c in range(first, last + 1)}
    expected = {c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))}
    assert covered == expected


@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("keep_accents", [False, True])
def test_graph_matches_python(lowercase, keep_accents):
    graph = normalize_text_tf(tf.constant(TRICKY), lowercase=lowercase, keep_accents=keep_accents)
    graph = [x.decode("utf-8") for x in graph.numpy()]
    python = [normalize_text(t, lowercase=lowercase, keep_accents=keep_accents) for t in TRICKY]
    assert graph == python


def test_goldens():
    assert normalize_text("  Caf\u00e9 ``quoted''  ") == 'Cafe "quoted"'
    assert normalize_text("a\t\n b") == "a b"
    assert normalize_text("a\t\n b", remove_space=False) == "a\t\n b"
    assert normalize_text("\u00c9cole", lowercase=True) == "ecole"
    assert normalize_text("\u00c9cole", keep_accents=True) == "\u00c9cole"
    assert normalize_text("\ufb01") == "fi"  # NFKD is a compatibility decomposition


def test_split_long_line_cuts_at_spaces():
    line = "aaa bb cccc d eeeee"
    pieces = split_long_line(line, 7)
    assert pieces == ["aaa bb", "cccc d", "eeeee"]
    assert all(len(p) <= 7 for p in pieces)
    assert " ".join(pieces) == line


def test_split_long_line_hard_cuts_a_spaceless_run():
    assert split_long_line("x" * 10, 4) == ["xxxx", "xxxx", "xx"]
    assert split_long_line("ab " + "x" * 6, 4) == ["ab", "xxxx", "xx"]
    assert split_long_line("short", 10) == ["short"]
    assert split_long_line("", 10) == []
    with pytest.raises(ValueError, match="max_chars must be positive"):
        split_long_line("x", 0)


def test_split_long_line_ten_megabytes():
    words = [f"word{i % 97}" for i in range(1_500_000)]
    line = " ".join(words)
    assert len(line) > 10_000_000
    pieces = split_long_line(line, 4096)
    assert all(0 < len(p) <= 4096 for p in pieces)
    assert " ".join(pieces) == line


@pytest.mark.parametrize("lowercase, keep_accents", [(False, False), (True, False), (False, True), (True, True)])
def test_normalize_lines_equals_normalize_text_line_by_line(lowercase, keep_accents):
    import random

    # Every whitespace but "\n", LaTeX quotes, accents (precomposed, combining, compatibility forms that
    # decompose to a space), Greek sigma (its lowercase depends on the neighbours).
    alphabet = list("ab Z\t\r\x0b\x0c\x1c\x85\xa0\u2000\u2028\u3000`'\"\u00e9\u0301\u00a8\ufb01\u03a3\u03c3.,")
    rng = random.Random(0)
    for _ in range(300):
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 6))]
        expected = [normalize_text(line, lowercase=lowercase, keep_accents=keep_accents) for line in lines]
        assert normalize_lines(lines, lowercase=lowercase, keep_accents=keep_accents) == expected, lines
    assert normalize_lines(["  Caf\u00e9  au\tlait ", "``quoted''", "", "don't"]) == [
        "Cafe au lait", '"quoted"', "", "don't"]


def test_normalize_lines_whitespace_tables_are_pythons():
    # The fast check of `normalize_lines` splits Python's whitespace set into non-ASCII characters and a
    # byte table; together with " " and "\n" they must be that set exactly.
    found = set(text_normalization._NON_ASCII_WHITESPACE) | {" ", "\n"}
    found |= {chr(i) for i in range(256) if text_normalization._ascii_other_whitespace_table()[i]}
    assert found == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
