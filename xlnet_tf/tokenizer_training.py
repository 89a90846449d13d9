"""Trains a SentencePiece vocabulary with the released XLNet special ids.

The library behind `xlnet-tf vocab --input FILES --vocab-size N --output spiece.model`
(`xlnet_tf.cli.vocab`).

The released XLNet vocabulary is a unigram SentencePiece model whose first
nine pieces are `<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>` (ids
0..8). SentencePiece reserves 0..2 for unk/bos/eos by default; the next five
are declared as control symbols (never produced from text) and `<eop>` as a
user-defined symbol (the literal text `<eop>` encodes to id 8, which is how the
original data marked paragraph ends). The original also declared a few
punctuation marks as user-defined symbols right after `<eop>` so they are
always single pieces; `DEFAULT_EXTRA_SYMBOLS` keeps that choice.

Input convention (the original one): UTF-8 text files, one sentence per line,
a blank line between documents. Blank lines are skipped; every other line is
normalized exactly as the tokenizer and the Beam job normalize it
(`xlnet_tf.text_normalization.normalize_text`) so the pieces learned are the
pieces seen at encode time. Lines longer than `max_sentence_chars` are split
at spaces (as the Beam job does) instead of being dropped by SentencePiece.
"""

import io
import os
import sys
import sentencepiece as spm

from xlnet_tf.formats.special_tokens import BOS_TOKEN_ID
from xlnet_tf.beam.job_files import expand_input_files
from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.formats.special_tokens import CONTROL_SYMBOLS
from xlnet_tf.formats.special_tokens import EOS_TOKEN_ID
from xlnet_tf.formats.special_tokens import SPECIAL_PIECES
from xlnet_tf.formats.special_tokens import UNK_TOKEN_ID
from xlnet_tf.formats.special_tokens import USER_DEFINED_SYMBOLS
from xlnet_tf.text_normalization import normalize_text
from xlnet_tf.text_normalization import split_long_line
from xlnet_tf.storage import atomic_files

DEFAULT_EXTRA_SYMBOLS = (".", "(", ")", '"', "-", "\u2013", "\u00a3", "\u20ac")


class VocabularyTrainingError(ValueError):
    """Bad input or settings for `train_vocabulary`."""


def _has_scheme(path):
    return "://" in path


def expand_input_patterns(patterns):
    """Files/globs (local or any `tf.io.gfile` scheme such as gs://) -> the files to read, each checked.

    The Beam jobs' expansion (`job_files.expand_input_files`, which lists globs with
    `tf.io.gfile`; plain local paths need no TensorFlow): a missing path, a glob matching
    no file, a directory, a file that is not UTF-8 text or cannot be read, and one file
    reached twice (`a.txt` and `./a.txt`, a glob overlapping a path) are refused by name.

    Args:
        patterns: a `str` or a list of `str` paths or glob patterns.

    Returns:
        The files, in the order of `patterns` (a glob's matches sorted).

    Raises:
        VocabularyTrainingError: naming the first pattern or file that cannot be read.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    try:
        return expand_input_files([os.path.expanduser(os.fspath(pattern)) for pattern in patterns])
    except PipelineInputError as e:
        raise VocabularyTrainingError(str(e)) from None


def _open_binary(path):
    if _has_scheme(path):
        import tensorflow as tf  # import time: `xlnet-tf vocab` on local files never loads TensorFlow

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def _iter_sentences(files, *, lowercase, keep_accents, max_sentence_chars, counts):
    for path in files:
        with _open_binary(path) as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    # One bad line should not sink a vocabulary built from terabytes; it is
                    # counted and reported instead.
                    counts["undecodable_lines"] += 1
                    if counts["undecodable_lines"] <= 5:
                        print(f"xlnet-tf vocab: skipping undecodable line {path}:{line_number} ({e}).", file=sys.stderr)
                    continue
                line = normalize_text(line, lowercase=lowercase, keep_accents=keep_accents)
                if not line:
                    continue
                for piece in split_long_line(line, max_sentence_chars):
                    counts["sentences"] += 1
                    yield piece


def train_vocabulary(
    input_files,
    vocab_size,
    output_path,
    *,
    character_coverage=0.99995,
    input_sentence_size=10_000_000,
    shuffle_input_sentence=True,
    extra_symbols=DEFAULT_EXTRA_SYMBOLS,
    lowercase=False,
    keep_accents=False,
    max_sentence_chars=4096,
    hard_vocab_limit=True,
    num_threads=None,
    seed=0,
    verbose=False,
):
    """Trains a unigram SentencePiece model with XLNet's special ids 0..8.

    Args:
        input_files: path, glob, or list of them (local or gs://). One sentence per
            line, blank line between documents, UTF-8.
        vocab_size: number of pieces, special pieces included.
        output_path: where to write the `.model` file (local or gs://).
        character_coverage: fraction of characters covered by the alphabet
            (the original used 0.99995; use 1.0 for small alphabets).
        input_sentence_size: sentences sampled for training (0 = all).
        shuffle_input_sentence: sample randomly rather than take the first ones.
        extra_symbols: extra user-defined pieces placed right after `<eop>`.
        lowercase: lowercase before training (an uncased vocabulary).
        keep_accents: keep accents (otherwise NFKD and drop combining marks).
        max_sentence_chars: longer lines are split at spaces into pieces this long.
        hard_vocab_limit: if False, the vocabulary may come out smaller than asked
            when the corpus is too small.
        num_threads: trainer threads (default: all cores). Use 1 for a
            bit-reproducible model.
        seed: SentencePiece's random seed (sampling and shuffling).
        verbose: print SentencePiece's training log.

    Returns:
        A dict: `path`, `vocabulary_size`, `sentences` (fed to the trainer),
        `undecodable_lines` (skipped), `files` (matched inputs).

    Raises:
        VocabularyTrainingError: missing input, no text, or a bad setting.

    Example:
    >>> import os, tempfile
    >>> from xlnet_tf import train_vocabulary, write_builtin_corpus
    >>> folder = tempfile.mkdtemp()
    >>> corpus = os.path.join(folder, "corpus.txt")
    >>> _ = write_builtin_corpus(corpus, max_bytes=50_000)  # English prose from Python's docstrings
    >>> summary = train_vocabulary(corpus, 300, os.path.join(folder, "spiece.model"))  # 32000 on a full corpus
    >>> summary["vocabulary_size"], len(summary["files"])
    (300, 1)
    """
    if int(vocab_size) <= len(SPECIAL_PIECES) + len(extra_symbols):
        raise VocabularyTrainingError(
            f"vocab_size={vocab_size} leaves no room for learned pieces after the "
            f"{len(SPECIAL_PIECES) + len(extra_symbols)} special and extra symbols."
        )
    if not 0.0 < character_coverage <= 1.0:
        raise VocabularyTrainingError(f"character_coverage must be in (0, 1], got {character_coverage}.")
    for symbol in extra_symbols:
        if not symbol or symbol in SPECIAL_PIECES:
            raise VocabularyTrainingError(f"extra symbol {symbol!r} is empty or collides with a special piece.")
    files = expand_input_patterns(input_files)
    counts = {"sentences": 0, "undecodable_lines": 0}
    sentences = _iter_sentences(
        files,
        lowercase=lowercase,
        keep_accents=keep_accents,
        max_sentence_chars=max_sentence_chars,
        counts=counts,
    )
    spm.set_random_generator_seed(int(seed))
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences,
            model_writer=model,
            model_type="unigram",
            vocab_size=int(vocab_size),
            character_coverage=float(character_coverage),
            input_sentence_size=int(input_sentence_size),
            shuffle_input_sentence=bool(shuffle_input_sentence),
            control_symbols=list(CONTROL_SYMBOLS),
            user_defined_symbols=[*USER_DEFINED_SYMBOLS, *extra_symbols],
            unk_id=UNK_TOKEN_ID,
            bos_id=BOS_TOKEN_ID,
            eos_id=EOS_TOKEN_ID,
            # `<pad>` is a control symbol at its fixed id, not SentencePiece's own padding piece.
            pad_id=-1,
            # Normalization happened above; the model keeps SentencePiece's default
            # nmt_nfkc rule so it behaves like the released model on raw input too.
            max_sentence_length=max(4192, 4 * int(max_sentence_chars)),
            hard_vocab_limit=bool(hard_vocab_limit),
            num_threads=int(num_threads or os.cpu_count() or 1),
            minloglevel=0 if verbose else 2,
        )
    except RuntimeError as e:
        if counts["sentences"] == 0:
            raise VocabularyTrainingError(f"No text to train on: every line of {files} is blank or undecodable.") from e
        hint = ""
        if "Vocabulary size too high" in str(e):
            hint = " (the corpus is too small for this vocab_size; lower it, or allow a smaller vocabulary with " \
                "hard_vocab_limit=False / --soft-vocab-limit)"
        elif "smaller than required_chars" in str(e):
            hint = (f" (vocab_size {vocab_size} cannot hold every character the corpus needs; raise it, "
                    "or lower character_coverage)")
        raise VocabularyTrainingError(f"SentencePiece training failed{hint}: {e}") from e
    proto = model.getvalue()
    processor = spm.SentencePieceProcessor(model_proto=proto)
    found = [processor.id_to_piece(i) for i in range(len(SPECIAL_PIECES))]
    if tuple(found) != SPECIAL_PIECES:
        # Guards against a SentencePiece release that orders reserved pieces differently.
        raise VocabularyTrainingError(f"Trained model has special pieces {found}, expected {list(SPECIAL_PIECES)}.")
    output_path = os.fspath(output_path)
    # Atomic (temporary sibling, then rename): an interrupted run never leaves a truncated
    # model that a later `--vocab` would load. Local paths need no TensorFlow import.
    atomic_files.write_bytes(output_path if _has_scheme(output_path) else os.path.abspath(output_path),
                             proto)
    return {
        "path": output_path,
        "vocabulary_size": processor.vocab_size(),
        "sentences": counts["sentences"],
        "undecodable_lines": counts["undecodable_lines"],
        "files": files,
    }

