"""Text normalization applied before SentencePiece, in Python and in-graph.

The released XLNet models were trained on text that went through one fixed
normalization before SentencePiece saw it: runs of whitespace collapsed to one
space and the ends stripped, the LaTeX-style quotes ```` `` ```` and ``''``
turned into ``"``, accents removed (NFKD, then every combining character
dropped) and, for uncased models, lowercasing. Feeding un-normalized text to a
released vocabulary gives different ids than the model saw in pretraining, so
the tokenizer (in-graph, `normalize_text_tf`) and the Beam job (plain Python,
`normalize_text`) both apply it, and tests check the two agree.

Both functions use the same explicit tables (Python's whitespace set and
Python's `unicodedata.combining` set) rather than Unicode categories, so they
agree character for character except where TensorFlow's ICU and Python's
`unicodedata` disagree on NFKD itself (a newer Unicode version on one side).

Text that is not valid Unicode has one policy on every path: each undecodable
UTF-8 sequence (and each lone surrogate of a Python `str`) becomes U+FFFD, the
replacement character, before normalization. In Python `replace_undecodable`
does it and says where (the tokenizer's eager path warns with the count, the
row and the position); in graphs `replace_undecodable_tf` (the core op
`UnicodeTranscode`) does it silently, with the same result byte for byte.
"""

import functools
import re
import sys
import unicodedata
import numpy as np

# Python's `str.split()` whitespace: exactly these code points (checked in the
# tests against `str.isspace` over all of Unicode); the graph version needs it
# spelled out.
_WHITESPACE_CLASS = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_RE2_WHITESPACE_CLASS = (
    r"\t\n\x{000B}\x{000C}\r\x{001C}-\x{001F} \x{0085}\x{00A0}\x{1680}"
    r"\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
)
_WHITESPACE_RE = re.compile(f"[{_WHITESPACE_CLASS}]+")
_LATEX_QUOTES_RE = re.compile(r"``|''")
# `_WHITESPACE_CLASS` split for `normalize_lines`: the non-ASCII members, and a byte table of the ASCII
# ones other than " " and "\n".
_NON_ASCII_WHITESPACE = ("\x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
                         + "\u2028\u2029\u202f\u205f\u3000")


@functools.cache
def _ascii_other_whitespace_table():
    table = np.zeros(256, bool)
    table[[0x09, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F]] = True
    return table



REPLACEMENT_CHARACTER = "\ufffd"


def replace_undecodable(text):
    r"""`text` as valid Unicode, each undecodable part replaced with U+FFFD.

    `bytes` are decoded as UTF-8; each maximal invalid sequence becomes one
    U+FFFD (Python's `errors="replace"`, which is also what
    `replace_undecodable_tf` gives, checked in the tests). In a `str`, a
    surrogate escape (`\udc80`-`\udcff`, how Python hands over undecodable
    command-line or file-name bytes, PEP 383) stands for its byte and is decoded
    as such; any other lone surrogate becomes U+FFFD.

    Args:
        text: `str` or `bytes`.

    Returns:
        `(clean, positions)`: the valid `str`, and where the input was not valid:
        byte offsets of the invalid sequences for `bytes`, character indices of
        the surrogates for a `str` (empty when nothing was replaced).

    Example:
    >>> replace_undecodable(b"caf\xe9 au lait")
    ('caf� au lait', [3])
    >>> replace_undecodable("lone \ud800")
    ('lone �', [5])
    """
    if isinstance(text, str):
        try:
            text.encode("utf-8")
            return text, []
        except UnicodeEncodeError:
            pass
        positions = [index for index, char in enumerate(text) if "\ud800" <= char <= "\udfff"]
        raw = bytearray()
        for char in text:
            if "\udc80" <= char <= "\udcff":
                raw.append(ord(char) - 0xDC00)  # the original byte
            elif "\ud800" <= char <= "\udfff":
                raw.extend(REPLACEMENT_CHARACTER.encode("utf-8"))
            else:
                raw.extend(char.encode("utf-8"))
        return bytes(raw).decode("utf-8", "replace"), positions
    data = memoryview(bytes(text))
    pieces, positions, start = [], [], 0
    while True:
        try:
            pieces.append(str(data[start:], "utf-8"))
            return "".join(pieces), positions
        except UnicodeDecodeError as error:
            # The decoder stops at the first invalid sequence and views do not copy: linear.
            pieces.append(str(data[start:start + error.start], "utf-8"))
            pieces.append(REPLACEMENT_CHARACTER)
            positions.append(start + error.start)
            start += error.end


def replace_undecodable_tf(text):
    """In-graph `replace_undecodable` for a `tf.string` tensor of any shape (no positions)."""
    import tensorflow as tf  # import time: Beam workers normalize text in Python, never loading TensorFlow

    return tf.strings.unicode_transcode(text, input_encoding="UTF-8", output_encoding="UTF-8",
                                        errors="replace", replacement_char=ord(REPLACEMENT_CHARACTER))


@functools.cache
def combining_ranges():
    """Code point ranges `(first, last)` whose `unicodedata.combining` is non-zero."""
    ranges = []
    for code_point in range(sys.maxunicode + 1):
        if unicodedata.combining(chr(code_point)):
            if ranges and ranges[-1][1] == code_point - 1:
                ranges[-1][1] = code_point
            else:
                ranges.append([code_point, code_point])
    return tuple((first, last) for first, last in ranges)


@functools.cache
def _combining_re():
    parts = []
    for first, last in combining_ranges():
        parts.append(re.escape(chr(first)) if first == last else f"{re.escape(chr(first))}-{re.escape(chr(last))}")
    return re.compile(f"[{''.join(parts)}]+")


@functools.cache
def _re2_combining_class():
    parts = []
    for first, last in combining_ranges():
        parts.append(f"\\x{{{first:04X}}}" if first == last else f"\\x{{{first:04X}}}-\\x{{{last:04X}}}")
    return f"[{''.join(parts)}]+"


def normalize_text(text, *, lowercase=False, keep_accents=False, remove_space=True):
    """Normalizes one string the way XLNet's pretraining data was normalized.

    Args:
        text: `str`.
        lowercase: lowercase the result (uncased vocabularies).
        keep_accents: when False, decompose (NFKD) and drop combining marks.
        remove_space: collapse whitespace runs to one space and strip the ends.

    Returns:
        The normalized `str`.

    Example:
    >>> normalize_text("  Caf\u00e9 ``quoted''  ")
    'Cafe "quoted"'
    """
    if remove_space:
        # `str.split()` splits on exactly the set in `_WHITESPACE_CLASS`, in C.
        text = " ".join(text.split())
    return _normalize_characters(text, lowercase, keep_accents)


def _normalize_characters(text, lowercase, keep_accents):
    """The steps after whitespace: LaTeX quotes, accents, case. Each maps characters in place, never across a
    line break, so running them on many `\n`-joined lines at once equals running them line by line."""
    # One-character searches first: a two-character `in` scans text far slower than `memchr`.
    if ("`" in text and "``" in text) or ("'" in text and "''" in text):
        text = _LATEX_QUOTES_RE.sub('"', text)
    if not keep_accents and not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = _combining_re().sub("", text)
    if lowercase:
        text = text.lower()
    return text


def normalize_lines(lines, *, lowercase=False, keep_accents=False):
    """`normalize_text` of every line of a list, with the character steps run once over all of them.

    Equals `[normalize_text(line, ...) for line in lines]` (tested) for lines
    without `\n`, at a fraction of the cost for thousands of short lines: the
    Beam pretraining job normalizes its batches this way.

    Args:
        lines: `str`s without `\n`.
        lowercase: lowercase the result (uncased vocabularies).
        keep_accents: when False, decompose (NFKD) and drop combining marks.

    Returns:
        A list of normalized `str`, one per line.

    Example:
    >>> normalize_lines(["  Caf\u00e9  au\tlait ", "``quoted''"])
    ['Cafe au lait', '"quoted"']
    """
    text = "\n".join(lines)
    dirty = _lines_with_whitespace_to_collapse(text)
    if dirty is None:
        collapsed = [" ".join(line.split()) for line in lines]
    else:
        collapsed = list(lines)
        for index in dirty.tolist():
            collapsed[index] = " ".join(collapsed[index].split())
    if dirty is None or dirty.size:
        text = "\n".join(collapsed)
    normalized = _normalize_characters(text, lowercase, keep_accents)
    return collapsed if normalized is text else normalized.split("\n")


def _lines_with_whitespace_to_collapse(text):
    """Indices of the `\n`-separated lines of `text` whose whitespace is not already single spaces between
    words (None: treat every line so), found in a few array passes over the UTF-8 bytes instead of a split
    and join per line."""
    if not text.isascii() and any(char in text for char in _NON_ASCII_WHITESPACE):
        return None
    data = np.frombuffer(text.encode("utf-8"), np.uint8)  # [B]
    if not data.size:
        return np.zeros([0], np.int64)
    space, newline = data == 0x20, data == 0x0A  # [B]
    bad = _ascii_other_whitespace_table()[data]  # [B]: "\t", "\r", ...
    bad[1:] |= space[1:] & (space[:-1] | newline[:-1])  # a second space, or a space opening a line
    bad[:-1] |= space[:-1] & newline[1:]  # a space closing a line
    bad[0] |= space[0]
    bad[-1] |= space[-1]
    positions = np.flatnonzero(bad)
    # A position's line is the number of "\n" before it.
    return np.unique(np.searchsorted(np.flatnonzero(newline), positions))


def normalize_text_tf(text, *, lowercase=False, keep_accents=False, remove_space=True):
    """In-graph `normalize_text` for a `tf.string` tensor of any shape.

    Args:
        text: `tf.string` tensor, any shape (elementwise).
        lowercase, keep_accents, remove_space: as in `normalize_text`.

    Returns:
        A `tf.string` tensor of the same shape, valid UTF-8 (`replace_undecodable_tf` first).
    """
    import tensorflow as tf  # import time: Beam workers normalize text in Python, never loading TensorFlow
    import tensorflow_text as tf_text  # import time: only the in-graph normalization needs it

    # Before the regexes: RE2 and ICU need valid UTF-8, and SentencePiece would read the bytes
    # differently from the Python path.
    text = replace_undecodable_tf(text)
    if remove_space:
        text = tf.strings.regex_replace(text, f"[{_RE2_WHITESPACE_CLASS}]+", " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
    text = tf.strings.regex_replace(text, "``|''", '"')
    if not keep_accents:
        text = tf_text.normalize_utf8(text, "NFKD")
        text = tf.strings.regex_replace(text, _re2_combining_class(), "")
    if lowercase:
        text = tf.strings.lower(text, encoding="utf-8")
    return text


def split_long_line(line, max_chars):
    """Splits `line` into pieces of at most `max_chars` characters.

    Cuts at the last space inside each window so words stay whole; a window
    without any space (a 10 MB run of one "word") is cut hard at `max_chars`.
    Spaces at the cuts are dropped. A line already short enough comes back as
    the only piece.

    Args:
        line: normalized `str` (whitespace already collapsed to single spaces).
        max_chars: positive `int`.

    Returns:
        A list of non-empty `str` pieces whose concatenation, with the dropped
        spaces, is `line`.
    """
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}.")
    if len(line) <= max_chars:
        return [line] if line else []
    pieces = []
    start = 0
    while len(line) - start > max_chars:
        end = start + max_chars
        # A space right after the window is a clean cut as well.
        cut = line.rfind(" ", start, end + 1)
        if cut <= start:
            pieces.append(line[start:end])
            start = end
        else:
            pieces.append(line[start:cut])
            start = cut + 1
        while start < len(line) and line[start] == " ":
            start += 1
    if start < len(line):
        pieces.append(line[start:])
    return [piece for piece in pieces if piece]
