"""Reading one line-based file (text, JSONL) as byte ranges, so one large file spreads over workers.

A file larger than `range_bytes` is cut into ranges of that many bytes. Each
range owns the lines that START inside it: its reader skips the partial line
at its head (the previous range reads that one to its end) and reads its last
line on past the range's end. Every line is thus read exactly once, by one
range, however the cuts fall. Records that span lines (the pretraining job's
documents) use the same rule one level up: `documents_in_range` owns the
documents whose first line starts in the range.

A worker holds one line at a time (plus what its caller batches), so memory
does not grow with the file. Compressed files (`.gz`) cannot be entered in
the middle and are read whole, as one range.
"""

import gzip
import itertools

from xlnet_tf.formats.pretraining_records import INPUT_ENTRY_KEYS
from xlnet_tf.storage import atomic_files

# ASCII whitespace: what `bytes.strip()` removes, so "blank line" means the same here and in the readers.
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")
_BACKWARD_CHUNK = 4096
COMPRESSED = "compressed: a .gz stream cannot be entered in the middle"


def is_splittable(path):
    """Whether `path` can be read in byte ranges (not compressed)."""
    return not str(path).endswith(".gz")


def reading_plan(path, range_bytes, whole_reason=None):
    """How one input file is read: its byte ranges and its manifest `inputs` entry (both jobs').

    Args:
        path: a local or `tf.io.gfile` path.
        range_bytes: bytes per range (> 0).
        whole_reason: why the caller's format cannot be split (CSV, one JSON
            document), or None; compressed files are read whole in any case.

    Returns:
        `(ranges, entry)`: `byte_ranges`'s list, and a dict with the keys
        `pretraining_records.INPUT_ENTRY_KEYS` (`read_whole` None unless read whole for a reason).

    Example:
    >>> reading_plan("corpus.txt.gz", 64 << 20)  # doctest: +SKIP
    ([(0, None)], {'file': 'corpus.txt.gz', 'ranges': 1, 'read_whole': 'compressed: ...'})
    """
    if whole_reason is None and not is_splittable(path):
        whole_reason = COMPRESSED
    ranges = [(0, None)] if whole_reason else byte_ranges(path, range_bytes)
    return ranges, dict(zip(INPUT_ENTRY_KEYS, (path, len(ranges), whole_reason)))


def file_size(path):
    """Size of a local or `tf.io.gfile` file in bytes."""
    return int(atomic_files.gfile(path).stat(path).length)


def byte_ranges(path, range_bytes, size=None):
    """`[(start, end), ...]` covering `path`; one `(0, None)` range when it cannot or need not be split.

    Args:
        path: a local or `tf.io.gfile` path.
        range_bytes: bytes per range (> 0).
        size: the file's size when already known.

    Returns:
        A list of `(start, end)` byte offsets; `end` None means "to the end of the file".

    Example:
    >>> byte_ranges("big.jsonl", 64 << 20)  # doctest: +SKIP
    [(0, 67108864), (67108864, 134217728), (134217728, None)]
    """
    if not is_splittable(path):
        return [(0, None)]
    size = file_size(path) if size is None else size
    if size <= range_bytes:
        return [(0, None)]
    starts = list(range(0, size, range_bytes))
    return list(itertools.pairwise(starts)) + [(starts[-1], None)]


def _open(path):
    if "://" in path:
        return atomic_files.gfile(path).GFile(path, "rb")
    # Python's own buffered reader splits lines several times faster than GFile.
    return open(path, "rb", buffering=1 << 20)


def _previous_line_is_blank(path, position):
    """Whether the line that ends just before `position` (a line start) is blank; true at the file's start."""
    cursor = position - 1  # the "\n" that ends the previous line
    with _open(path) as f:
        while cursor > 0:
            begin = max(0, cursor - _BACKWARD_CHUNK)
            f.seek(begin)
            chunk = f.read(cursor - begin)
            for byte in reversed(chunk):
                if byte == 0x0A:
                    return True
                if byte not in _WHITESPACE:
                    return False
            cursor = begin
    return True


def lines_from(path, start=0):
    """Yields `(offset, raw line)` for every line starting at or after byte `start`, to the end of the file.

    Lines keep their `\\n`; `.gz` files are decompressed (and only `start=0` is valid for them).
    A line that begins before `start` and runs past it is not yielded.
    """
    with _open(path) as raw:
        if path.endswith(".gz"):
            if start:
                raise ValueError(f"{path}: a compressed file cannot be read from byte {start}.")
            with gzip.GzipFile(fileobj=raw, mode="rb") as f:
                offset = 0
                for line in f:
                    yield offset, line
                    offset += len(line)
            return
        offset = start
        if start:
            raw.seek(start - 1)
            if raw.read(1) != b"\n":
                offset += len(raw.readline())  # the head of a line the previous range owns
        for line in raw:
            yield offset, line
            offset += len(line)


def lines_in_range(path, start=0, end=None):
    """Yields `(offset, raw line)` for the lines that start in `[start, end)` (`end` None: to the end)."""
    for offset, line in lines_from(path, start):
        if end is not None and offset >= end:
            return
        yield offset, line


def documents_in_range(path, start=0, end=None):
    """Yields the documents whose first line starts in `[start, end)`, each a list of raw lines.

    A document is a maximal run of non-blank lines (blank: only ASCII
    whitespace). The last document is read on to its end past `end`; a
    document that started before `start` is skipped.
    """
    lines = lines_from(path, start)
    first = next(lines, None)
    if first is None:
        return
    # A range that begins inside a document (the previous line is not blank) skips to that document's end.
    inside_foreign = bool(start) and not _previous_line_is_blank(path, first[0])
    document = []
    for offset, line in itertools.chain([first], lines):
        if not line.strip():
            inside_foreign = False
            if document:
                yield document
                document = []
            continue
        if inside_foreign:
            continue
        if not document and end is not None and offset >= end:
            return  # this document, and every later one, belongs to the next range
        document.append(line)
    if document:
        yield document
