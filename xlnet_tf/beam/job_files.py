"""The files of both Beam jobs: inputs expanded and checked, read failures named, vocabulary, output directory.

Everything a job can find wrong with its files before the pipeline starts is
found here, and said in one line naming the file: a path that does not exist,
a glob that matches nothing, a directory, a FIFO or other special file, a
symbolic link to nothing, a file that cannot be opened or decompressed, a
file that is not UTF-8 text, the same file given twice, an output directory
that is a file. A file that fails while the job reads it (cut short, removed,
unreadable on a worker) is named the same way by `reading`, and the launcher
prints that as one line too (`runner_options.run_pipeline`).

Light on purpose (TensorFlow only inside functions): the Beam workers import
it for `reading`.
"""

import contextlib
import gzip
import hashlib
import os
import stat
import sys
import zlib

import sentencepiece as spm

from xlnet_tf.formats.special_tokens import SPECIAL_PIECES
from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS
from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import line_ranges
from xlnet_tf.storage.output_directory import check_output_directory

_GLOB_CHARACTERS = ("*", "?", "[")
# Bytes of each local input read before the job starts: it opens, decompresses, and is not UTF-16.
_HEAD_BYTES = 4096
# Byte-order marks of encodings that are not UTF-8, longest first (UTF-32 LE starts like UTF-16 LE).
_OTHER_ENCODING_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _tensorflow():
    """TensorFlow, for `tf.io.gfile` (globs, `gs://`) in the launcher only."""
    import tensorflow as tf  # import time: Beam workers import this module for `reading` and never need it

    return tf


def expand_input_files(patterns):
    """Input paths and globs -> the files to read, each checked before the job starts.

    A path that exists is taken as given (glob characters in a file name
    included); otherwise a pattern with `*`, `?` or `[` is a glob, whose
    matches come sorted. Directories that a glob matches are passed over (a
    path given as such that is a directory is an error). Local files are
    opened and their first bytes read; files on other filesystems (`gs://`)
    are listed only, and a read failure there stops the job with one line
    naming the file (`reading`).

    Args:
        patterns: file paths and globs (local or any `tf.io.gfile` scheme).

    Returns:
        The files, in the order of `patterns`.

    Raises:
        PipelineInputError: naming the first pattern or file that is missing,
            a directory, not a regular file, unreadable, not UTF-8 text, or
            the same file as an earlier one (the same path spelled twice, a
            glob overlapping a path, a link): reading it twice would repeat
            its examples.

    Example:
    >>> from xlnet_tf.beam.job_files import expand_input_files
    >>> expand_input_files(["corpus/*.txt", "extra.txt"])  # doctest: +SKIP
    ['corpus/a.txt', 'corpus/b.txt', 'extra.txt']
    """
    files, seen = [], {}
    for pattern in patterns:
        for path in _matches(pattern):
            key = _check_file(path, pattern)
            if key in seen:
                raise PipelineInputError(_repeated_file_message(seen[key], (path, pattern)))
            seen[key] = (path, pattern)
            files.append(path)
    return files


def _spelled(path, pattern):
    return repr(path) if path == pattern else f"{path!r} (matched by {pattern!r})"


def _repeated_file_message(first, second):
    """The message for one file reached twice: `first` and `second` are `(path, pattern)`."""
    named = (f"Input file {_spelled(*first)} is given twice" if first == second
             else f"Input file {_spelled(*first)} and {_spelled(*second)} are the same file")
    return (f"{named}, so its contents would be read twice; give each file once (to repeat a file's examples, "
            "copy it).")


def _exists(path):
    if atomic_files.is_local(path):
        return os.path.lexists(path)  # a link to nothing too: it is named below, not taken for a glob
    return _tensorflow().io.gfile.exists(path)


def _isdir(path):
    if atomic_files.is_local(path):
        return os.path.isdir(path)
    return _tensorflow().io.gfile.isdir(path)


def _glob(pattern):
    """The paths a glob matches, as `tf.io.gfile.glob` spells them (local and remote alike)."""
    tf = _tensorflow()
    try:
        return tf.io.gfile.glob(pattern)
    except tf.errors.OpError as e:
        raise PipelineInputError(f"Input {pattern!r} cannot be listed: {error_reason(e)}.") from e


def _matches(pattern):
    """The paths `pattern` names, directories matched by a glob left out."""
    if not pattern:
        raise PipelineInputError("Input '' is empty; give a file path or a glob.")
    if _exists(pattern):
        if _isdir(pattern):
            raise PipelineInputError(f"Input {pattern!r} is a directory; give the files in it, e.g. "
                                     f"{os.path.join(pattern, '*')!r}.")
        return [pattern]
    if not any(c in pattern for c in _GLOB_CHARACTERS):
        raise PipelineInputError(f"Input {pattern!r} does not exist.")
    matched = sorted(_glob(pattern))
    files = [path for path in matched if not _isdir(path)]
    if matched and not files:
        raise PipelineInputError(f"Input {pattern!r} matches only directories ({matched[0]!r}"
                                 f"{', ...' if len(matched) > 1 else ''}); give the files in them, e.g. "
                                 f"{os.path.join(matched[0], '*')!r}.")
    if not files:
        raise PipelineInputError(f"Input {pattern!r} matches no file.")
    return files


def _check_file(path, pattern):
    """Checks one input file; returns what identifies it (device and inode locally, else the path)."""
    if not atomic_files.is_local(path):
        return path
    if os.path.islink(path) and not os.path.exists(path):
        raise PipelineInputError(f"Input {_spelled(path, pattern)} is a symbolic link to "
                                 f"{os.readlink(path)!r}, which does not exist.")
    try:
        status = os.stat(path)
    except OSError as e:
        raise PipelineInputError(read_failure_message([path], e)) from e
    for is_kind, kind in _SPECIAL_FILES:
        if is_kind(status.st_mode):
            raise PipelineInputError(f"Input {_spelled(path, pattern)} is {kind}, not a regular file; the job "
                                     "reads files (a pipe is read once, and would hang or be cut short).")
    _check_head(path)
    return status.st_dev, status.st_ino


def _check_head(path):
    """Opens a local file and reads its first bytes (decompressed): readable, and not UTF-16/32 or binary."""
    with reading(path), open(path, "rb") as f:
        if line_ranges.is_splittable(path):
            head = f.read(_HEAD_BYTES)
        else:
            with gzip.GzipFile(fileobj=f, mode="rb") as unzipped:
                head = unzipped.read(_HEAD_BYTES)
    problem = text_problem(head)
    if problem:
        raise PipelineInputError(f"Input file {path!r} is not UTF-8 text: {problem}; convert it to UTF-8 "
                                 "(e.g. iconv -f UTF-16 -t UTF-8) or leave it out of --input.")


def text_problem(head):
    """Why bytes from the start of a file are not UTF-8 text (another encoding's mark, NUL bytes), or None.

    Example:
    >>> from xlnet_tf.beam.job_files import text_problem
    >>> text_problem("caf\u00e9".encode("utf-16"))
    'it starts with a UTF-16 byte-order mark'
    """
    for mark, encoding in _OTHER_ENCODING_MARKS:
        if head.startswith(mark):
            return f"it starts with a {encoding} byte-order mark"
    if b"\x00" in head:
        return "it holds NUL bytes (UTF-16 without a byte-order mark, or a binary file)"
    return None


def error_reason(error):
    """An exception's message as one line (`strerror` for OS errors, TensorFlow's `message`)."""
    reason = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
    return " ".join(str(reason).split()) or type(error).__name__


def read_failure_message(paths, error):
    """The one-line message for input file(s) that cannot be read because of `error`."""
    named = (f"Input file {paths[0]!r}" if len(paths) == 1
             else f"One of the input files {', '.join(repr(p) for p in paths)}")
    return (f"{named} cannot be read: {error_reason(error)}. Check it (permissions, a complete copy) or leave "
            "it out of --input.")


def _is_read_error(error):
    if isinstance(error, (OSError, EOFError, zlib.error)):
        return True
    # `tf.io.gfile` errors (gs://, hdfs://); a worker that never loaded TensorFlow cannot have raised one.
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    return errors is not None and isinstance(error, errors.OpError)


@contextlib.contextmanager
def reading(*paths):
    """Turns a failure to read `paths` (I/O, decompression) into a `PipelineInputError` naming them.

    Wraps every read of the jobs' input files, on the workers too: a worker's
    `PipelineInputError` reaches the command line as one line
    (`runner_options.run_pipeline`), not as a runner's traceback.

    Example:
    >>> from xlnet_tf.beam.job_files import line_ranges, reading
    >>> with reading("corpus.txt.gz"):  # doctest: +SKIP
    ...     documents = list(line_ranges.documents_in_range("corpus.txt.gz"))
    """
    try:
        yield
    except PipelineInputError:
        raise
    except Exception as e:
        if not _is_read_error(e):
            raise
        raise PipelineInputError(read_failure_message(paths, e)) from e


def prepare_output_dir(output_dir, job_file_patterns, *, overwrite, kind):
    """Checks the output directory, removes the job's earlier files when `overwrite`, and creates it.

    Args:
        output_dir: `--output-dir` (local or any `tf.io.gfile` scheme).
        job_file_patterns: globs of the files the job writes there (shards, manifest).
        overwrite: replace such files; without it they stop the job.
        kind: what the files are, for the message (e.g. "pretraining").

    Raises:
        PipelineInputError: `output_dir` is a file or below one, cannot be
            created, or holds the job's files and `overwrite` is False.
    """
    tf = _tensorflow()
    try:
        check_output_directory(output_dir, overwrite=True, what="--output-dir")
    except ValueError as e:
        raise PipelineInputError(str(e)) from None
    existing = []
    if tf.io.gfile.isdir(output_dir):
        for pattern in job_file_patterns:
            existing.extend(tf.io.gfile.glob(os.path.join(output_dir, pattern)))
    if existing and not overwrite:
        raise PipelineInputError(f"Output directory {output_dir!r} already holds {len(existing)} {kind} file(s); "
                                 "pass --overwrite to replace them.")
    try:
        for path in existing:
            tf.io.gfile.remove(path)
        tf.io.gfile.makedirs(output_dir)
    except tf.errors.OpError as e:
        raise PipelineInputError(f"--output-dir {output_dir!r} cannot be written: {error_reason(e)}.") from e


def load_vocabulary(path):
    """Reads `--vocab` and checks XLNet's special pieces; returns `(bytes, manifest entry)`.

    Raises:
        PipelineInputError: `path` is missing, a directory, unreadable, not a
            SentencePiece model, or its ids 0..8 are not XLNet's special pieces.
    """
    tf = _tensorflow()

    if not tf.io.gfile.exists(path):
        raise PipelineInputError(f"Vocabulary {path!r} does not exist.")
    if tf.io.gfile.isdir(path):
        raise PipelineInputError(f"Vocabulary {path!r} is a directory; give the spiece.model file.")
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            proto = f.read()
    except tf.errors.OpError as e:
        raise PipelineInputError(f"Vocabulary {path!r} cannot be read: {error_reason(e)}.") from e
    try:
        processor = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as e:
        raise PipelineInputError(f"Vocabulary {path!r} is not a SentencePiece model: {e}") from e
    for token_id, expected in enumerate(SPECIAL_PIECES):
        found = processor.id_to_piece(token_id) if token_id < processor.vocab_size() else None
        if found != expected:
            raise PipelineInputError(
                f"Vocabulary {path!r}: id {token_id} is {found!r}, expected {expected!r} (XLNet special ids 0..8)."
            )
    entry = {"file": path, "sha256": hashlib.sha256(proto).hexdigest(), "vocabulary_size": processor.vocab_size(),
             "special_ids": dict(SPECIAL_TOKEN_IDS)}
    return proto, entry
