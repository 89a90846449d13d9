"""Byte-range reading of line-based files: every line and every document is read exactly once."""

import gzip
import os
import subprocess
import sys
import textwrap

import pytest

from xlnet_tf.storage import line_ranges

# Documents of various shapes: whitespace-only separators, CRLF, a long line, blank runs, no final newline.
_TEXT = (
    b"\n\n  \nFirst doc line one.\nFirst doc line two.\n\n"
    b"Second doc.\r\n\r\n \t \n"
    b"Third " + b"long " * 300 + b"line.\nThird, second sentence.\n\n\n\n"
    b"Fourth doc.\nstill fourth\n  indented fourth\n\nFifth, last, no newline at the end"
)


def _documents_whole(data):
    documents, current = [], []
    for line in data.splitlines(keepends=True):
        if line.strip():
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    return documents


def test_byte_ranges_cover_the_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 10)
    assert line_ranges.byte_ranges(str(path), 4) == [(0, 4), (4, 8), (8, None)]
    assert line_ranges.byte_ranges(str(path), 10) == [(0, None)]
    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(b"x\n" * 100))
    assert line_ranges.byte_ranges(str(gz), 4) == [(0, None)]


@pytest.mark.parametrize("range_bytes", [1, 2, 3, 5, 7, 16, 61, 500, 4096])
def test_every_document_read_once_whatever_the_cuts(tmp_path, range_bytes):
    path = tmp_path / "corpus.txt"
    path.write_bytes(_TEXT)
    expected = _documents_whole(_TEXT)
    ranges = line_ranges.byte_ranges(str(path), range_bytes)
    assert len(ranges) == -(-len(_TEXT) // range_bytes)
    found = [doc for start, end in ranges for doc in line_ranges.documents_in_range(str(path), start, end)]
    assert found == expected


@pytest.mark.parametrize("range_bytes", [1, 4, 9, 33, 1000])
def test_every_line_read_once_whatever_the_cuts(tmp_path, range_bytes):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(_TEXT)
    ranges = line_ranges.byte_ranges(str(path), range_bytes)
    found = [item for start, end in ranges for item in line_ranges.lines_in_range(str(path), start, end)]
    lines = _TEXT.splitlines(keepends=True)
    offsets = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    assert found == list(zip(offsets, lines))


def test_gzip_is_read_whole(tmp_path):
    path = tmp_path / "c.txt.gz"
    path.write_bytes(gzip.compress(_TEXT))
    assert list(line_ranges.documents_in_range(str(path))) == _documents_whole(_TEXT)
    with pytest.raises(ValueError, match=r"c\.txt\.gz: a compressed file cannot be read from byte 5"):
        list(line_ranges.lines_from(str(path), 5))


_PEAK_SCRIPT = textwrap.dedent("""
    import resource, sys
    from xlnet_tf.storage import line_ranges
    from xlnet_tf.tasks.example_rows import rows as _rows
    from xlnet_tf.beam.pretraining_data import _ReadDocuments

    kind, path = sys.argv[1], sys.argv[2]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    count = 0
    if kind == "text":
        for batch in _ReadDocuments().process(("file", path, 0, None)):
            count += 1
    else:
        for _ in _rows(path):
            count += 1
    print(count, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
""")


def _peak_growth(kind, path):
    output = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, kind, str(path)], check=True,
                            capture_output=True, text=True).stdout.split()
    return int(output[0]), int(output[1])


@pytest.mark.slow
@pytest.mark.subprocess
def test_reader_memory_does_not_grow_with_the_file(tmp_path):
    # One worker reads a 6 MB and a 24 MB single file (both jobs' readers): the peak memory the
    # read adds stays far below the file size, and does not grow with it.
    line = b'{"text": "' + b"a quiet river moves under the old mill " * 4 + b'", "label": 1}\n'
    document = b"A quiet river moves under the old mill near the garden.\n" * 8 + b"\n"
    sizes = {}
    for kind, unit in (("text", document), ("jsonl", line)):
        for megabytes in (6, 24):
            path = tmp_path / f"{kind}{megabytes}.txt"
            with open(path, "wb") as f:
                f.write(unit * (megabytes * 1_000_000 // len(unit)))
            sizes[kind, megabytes] = (os.path.getsize(path), _peak_growth(kind, path))
    for kind in ("text", "jsonl"):
        small_size, (small_count, small_peak) = sizes[kind, 6]
        large_size, (large_count, large_peak) = sizes[kind, 24]
        assert large_count > 3 * small_count
        # The old whole-file read of a JSONL file grew by at least the file's 24 MB.
        assert large_peak < large_size / 8, (kind, large_peak)
        assert large_peak - small_peak < (large_size - small_size) / 8, (kind, small_peak, large_peak)
