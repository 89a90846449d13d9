"""Apache Beam job: raw text or TFDS corpora -> XLNet pretraining TFRecords.

`xlnet-tf prepare-pretraining --input FILES|tfds:NAME[:SPLIT] ... --vocab spiece.model --output-dir DIR`
(the command is `xlnet_tf.cli.prepare_pretraining`; `prepare_pretraining_data` runs the job)

Writes the format specified in `xlnet_tf/formats/README.md` ("xlnet_tf.pretraining.v1"):
`pretrain-SSSSS-of-NNNNN.tfrecord` shards, each one contiguous token stream of
whole documents followed by `<eod>`, cut into `chunk_length`-token records
(`token_ids`, `sentence_ids`), plus `manifest.json`.

What counts as a document:
- text files (the original convention): a maximal run of non-blank lines; one
  line is one sentence; blank lines only separate documents. `.gz` files are
  decompressed.
- TFDS: one example's text feature; its lines are its sentences.

Every line is normalized like the tokenizer does
(`xlnet_tf.text_normalization.normalize_text`) and encoded with SentencePiece.
A line longer than `--max-sentence-chars` (a 10 MB line, say) is split at
spaces into pieces of at most that many characters, each one a sentence, so
the reader still finds sentence boundaries to cut A/B at (counted as
`lines_split`).

Skipped documents, counted by reason in Beam counters and the manifest:
`empty` (nothing left after normalization), `undecodable` (bytes that are not
UTF-8; with `--on-undecodable replace` they become U+FFFD instead and the
document is kept, counted in `documents_repaired`).

Determinism: a document's shard and its position inside the shard come from
SHA-256(seed, normalized document text). Every shard is written by one DoFn
call after a CoGroupByKey, sorting its documents by that hash, so the bytes of
every shard depend only on the input text, the vocabulary and the settings --
not on file names, the runner, the number of workers or bundle boundaries.
Identical documents share a hash and a shard; their relative order cannot
change the bytes.

Memory: a shard's documents are held by one worker while it is sorted and
written (under 14 bytes per token at the peak, its records included: a test
measures it); pick `--num-shards` so a shard fits (e.g. 1024 shards for a
100B-token corpus is under 1.4 GB per shard).
"""

import collections
import contextlib
import gc
import hashlib
import itertools
import json
import os

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
import sentencepiece as spm

from xlnet_tf.formats.pretraining_records import FORMAT
from xlnet_tf.formats.pretraining_records import MANIFEST_FILE as MANIFEST
from xlnet_tf.formats.pretraining_records import SHARD_ENTRY_KEYS
from xlnet_tf.formats.pretraining_records import SHARD_GLOB
from xlnet_tf.formats.pretraining_records import packed_varints
from xlnet_tf.formats.pretraining_records import record_cuts
from xlnet_tf.formats.pretraining_records import serialize_packed_records
from xlnet_tf.formats.pretraining_records import varint_offsets
from xlnet_tf.formats.pretraining_records import shard_file_name
from xlnet_tf.formats.special_tokens import EOD_TOKEN_ID
from xlnet_tf.storage import line_ranges
from xlnet_tf.beam.job_files import expand_input_files
from xlnet_tf.beam.job_files import load_vocabulary
from xlnet_tf.beam.job_files import prepare_output_dir
from xlnet_tf.beam.job_files import reading
from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.beam.runner_options import beam_options
from xlnet_tf.beam.runner_options import check_paths_for_runner
from xlnet_tf.beam.runner_options import check_runner_available
from xlnet_tf.beam.runner_options import run_pipeline
from xlnet_tf.beam.tfds_sub_splits import tfds_sub_splits
from xlnet_tf.preprocessing.digit_comma_split import DigitCommaSplit
from xlnet_tf.text_normalization import normalize_lines
from xlnet_tf.text_normalization import split_long_line
from xlnet_tf.storage import atomic_files

SKIP_REASONS = ("empty", "undecodable")
_NAMESPACE = "xlnet_pretraining"
TFDS_PREFIX = "tfds:"
# Uncompressed input files larger than this are read in ranges of this size, in parallel.
DEFAULT_READ_RANGE_BYTES = 64 << 20


JobResult = collections.namedtuple("JobResult", ["manifest", "pipeline_result"])


# --------------------------------------------------------------------------- sources


def _tfds():
    """TensorFlow Datasets, for `--tfds` sources only."""
    import tensorflow_datasets as tfds  # import time: it takes seconds; text-file sources never need it

    return tfds


def _tensorflow():
    """TensorFlow, for the launcher's file checks (`tf.io.gfile`) only."""
    import tensorflow as tf  # import time: the Beam workers of this job never load TensorFlow

    return tf


def _parse_tfds_spec(spec):
    """`tfds:NAME[:SPLIT]` -> (NAME, SPLIT); NAME may hold a config and version (`wikipedia/20230601.en`)."""
    body = spec[len(TFDS_PREFIX):]
    name, _, split = body.partition(":")
    if not name:
        raise PipelineInputError(f"Input {spec!r}: expected tfds:NAME[:SPLIT], e.g. tfds:wikipedia/20230601.en:train.")
    return name, split or "train"


def resolve_sources(inputs, *, tfds_text_feature="text", tfds_data_dir=None, tfds_download=False,
                    tfds_read_shards=1, read_range_bytes=DEFAULT_READ_RANGE_BYTES):
    """Checks every input before the pipeline starts and lists what to read.

    Args:
        inputs: file paths/globs (local or any `tf.io.gfile` scheme) and
            `tfds:NAME[:SPLIT]` specs.
        tfds_text_feature: the TFDS feature holding the document text.
        tfds_data_dir: TFDS data directory (default: TFDS's own).
        tfds_download: run `download_and_prepare` for datasets not prepared yet.
        tfds_read_shards: read each TFDS split as this many even sub-splits.
        read_range_bytes: uncompressed files larger than this are read as
            ranges of this many bytes, each on its own (`line_ranges`).

    Returns:
        `(sources, inputs)`: a sorted list of source tuples, `("file", path,
        start, end)` (a byte range; `end` None = to the end of the file) or
        `("tfds", name, split, feature, data_dir)`; and the manifest's
        `inputs` entries, one per file, sorted by path (how it is read:
        `line_ranges.reading_plan`).

    Raises:
        PipelineInputError: naming the first input that is missing, cannot be
            read or repeats another (`job_files.expand_input_files`), an
            unknown dataset or split, or a missing text feature.
    """
    if not inputs:
        raise PipelineInputError("No --input given.")
    tfds_specs = [spec for spec in inputs if spec.startswith(TFDS_PREFIX)]
    repeated = sorted({spec for spec in tfds_specs if tfds_specs.count(spec) > 1})
    if repeated:
        raise PipelineInputError(f"Input {repeated[0]!r} is given twice; give it once.")
    sources, entries = set(), {}
    for path in expand_input_files([spec for spec in inputs if not spec.startswith(TFDS_PREFIX)]):
        ranges, entries[path] = line_ranges.reading_plan(path, read_range_bytes)
        sources.update(("file", path, start, end) for start, end in ranges)
    for spec in tfds_specs:
        sources.update(_resolve_tfds(spec, tfds_text_feature, tfds_data_dir, tfds_download, tfds_read_shards))
    # By repr: TFDS even sub-splits are objects without an order of their own.
    return sorted(sources, key=repr), [entries[path] for path in sorted(entries)]


def _resolve_tfds(spec, feature, data_dir, download, read_shards):
    tfds = _tfds()

    name, split = _parse_tfds_spec(spec)
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except Exception as e:  # TFDS raises several types for unknown names/configs.
        raise PipelineInputError(f"Input {spec!r}: TFDS dataset {name!r} cannot be loaded: {e}") from e
    features = builder.info.features
    if feature not in features:
        raise PipelineInputError(
            f"Input {spec!r}: TFDS dataset {name!r} has no feature {feature!r} "
            f"(features: {sorted(features.keys())}); set --tfds-text-feature."
        )
    if download:
        builder.download_and_prepare()
    elif not builder.is_prepared():
        raise PipelineInputError(
            f"Input {spec!r}: TFDS dataset {name!r} is not prepared in {builder.data_dir!r}; run "
            f"`tfds build {name}` first or pass --tfds-download."
        )
    known_splits = set(builder.info.splits.keys())
    base_split = split.split("[")[0]
    if known_splits and base_split not in known_splits:
        raise PipelineInputError(f"Input {spec!r}: no split {base_split!r} (splits: {sorted(known_splits)}).")
    return {("tfds", name, sub, feature, data_dir) for sub in tfds_sub_splits(split, read_shards)}


# --------------------------------------------------------------------------- reading


class _ReadDocuments(beam.DoFn):
    """One source (a file's byte range, a TFDS sub-split) -> batches of documents, each its raw bytes.

    A document travels as one `bytes` (its lines joined by `\n`), undecoded: a
    batch pickles through the shuffle at memcpy cost, and decoding, like
    normalization, happens once per batch in `_TokenizeDocuments`. Batches
    of about `batch_bytes` make the shuffle cheaper and let SentencePiece
    encode many lines per call; their boundaries never reach the output
    (shards depend on content only).

    Counts go out as data on the "stats" output (`(name, n)`) and, per file, on
    the "files" output (`(path, documents)`), so the manifest's counts hold on
    runners without committed metrics; Beam counters mirror them for monitoring.
    """

    def __init__(self, batch_bytes=1 << 20):
        self._batch_bytes = int(batch_bytes)
        self._read = Metrics.counter(_NAMESPACE, "documents_read")

    def process(self, source):
        if source[0] == "file":
            # A file that fails now (cut short, removed, unreadable here) stops the job with one line naming it.
            documents, guard = line_ranges.documents_in_range(*source[1:]), reading(source[1])
        else:
            documents, guard = self._tfds_documents(*source[1:]), contextlib.nullcontext()
        num_documents = 0
        batch, batch_bytes = [], 0
        with guard:
            for raw_lines in documents:
                num_documents += 1
                document = b"".join(raw_lines)
                if document.endswith(b"\n"):
                    document = document[:-1]
                batch.append(document)
                batch_bytes += len(document)
                if batch_bytes >= self._batch_bytes:
                    yield batch
                    batch, batch_bytes = [], 0
        if batch:
            yield batch
        self._read.inc(num_documents)
        if source[0] == "file":
            # A file's ranges each report; `_FileStats` sums them per file.
            yield beam.pvalue.TaggedOutput("files", (source[1], num_documents))
        if num_documents:
            yield beam.pvalue.TaggedOutput("stats", ("documents_read", num_documents))

    @staticmethod
    def _tfds_documents(name, split, feature, data_dir):
        tfds = _tfds()

        builder = tfds.builder(name, data_dir=data_dir)
        dataset = builder.as_dataset(split=split, shuffle_files=False)
        for example in tfds.as_numpy(dataset):
            text = example[feature]
            if isinstance(text, str):
                text = text.encode("utf-8")
            if not isinstance(text, bytes):
                raise ValueError(f"TFDS {name}:{split}: feature {feature!r} holds {type(text).__name__}, not text.")
            # Blank lines inside one example are paragraph gaps, not document breaks.
            yield [line + b"\n" for line in text.split(b"\n") if line.strip()]


class _FileStats(beam.DoFn):
    """`(path, documents read from all its ranges)` -> `files_read` / `files_empty` stats."""

    def __init__(self):
        self._files = Metrics.counter(_NAMESPACE, "files_read")
        self._empty_files = Metrics.counter(_NAMESPACE, "files_empty")

    def process(self, element):
        _, documents = element
        self._files.inc()
        yield "files_read", 1
        if not documents:
            self._empty_files.inc()
            yield "files_empty", 1


# --------------------------------------------------------------------------- tokenizing


# Documents of one shard from one batch, in one shuffle element: five flat buffers instead of a Python
# tuple per document, so the shuffle and the runner's data channel move a few large byte strings.
DocumentPack = collections.namedtuple("DocumentPack", [
    "keys",  # [D, 24] uint8: each document's order key (SHA-256 bytes 8..31)
    "token_bytes",  # [B] uint8: the documents' token ids as the records' varints, one after another
    "byte_counts",  # [D] int32: varint bytes per document
    "sentence_lengths",  # [S] int32: tokens per sentence, one document after another
    "sentence_counts",  # [D] int32: sentences per document
])


def gather_segments(values, starts, counts, order):
    """`values[starts[i]:starts[i] + counts[i]]` for each `i` in `order`, concatenated in one copy.

    Args:
        values: array `[N]`.
        starts: int `[M]`, where segment `i` begins in `values`.
        counts: int `[M]`, its length.
        order: int `[K]`, the segments to take, in output order.

    Returns:
        Array `[sum(counts[order])]` of `values`' dtype.

    Example:
        >>> import numpy as np
        >>> from xlnet_tf.beam.pretraining_data import gather_segments
        >>> gather_segments(np.array([1, 2, 3, 4, 5]), np.array([0, 3]), np.array([3, 2]), np.array([1, 0]))
        array([4, 5, 1, 2, 3])
    """
    values = np.asarray(values)
    if not len(order):
        return values[:0]
    # Segments are documents (hundreds of tokens each): a view per segment and one copy beat an index per value.
    return np.concatenate([values[start:start + count]
                           for start, count in zip(np.asarray(starts)[order].tolist(),
                                                   np.asarray(counts)[order].tolist())])


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Pauses Python's cyclic garbage collector (reference counting still frees everything).

    SentencePiece returns one list per sentence: tens of thousands per batch, each
    tracked by the collector. They set off collections that walk the whole heap of
    a Beam worker, though lists of ints hold no cycles: a visible share of the
    job's CPU time on a worker with a large heap.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _TokenizeDocuments(beam.DoFn):
    """A batch of raw documents -> `(shard, DocumentPack as a tuple)`, one element per shard it reaches.

    The whole batch goes through each step at once: one decode per document,
    the character steps of normalization over the batch's text
    (`normalize_lines`), one SentencePiece call for all its sentences, the
    digit-comma rule on one flat id array (`DigitCommaSplit.split_flat`), the
    grouping by shard as one gather (`gather_segments`); per document only its
    hash is computed in Python. Few, large elements keep the shuffle's cost per
    token low: with worker processes every element crosses the runner's data
    channel twice.
    """

    def __init__(self, vocab_proto, *, seed, num_shards, lowercase, keep_accents, max_sentence_chars,
                 on_undecodable):
        self._vocab_proto = vocab_proto
        self._seed = int(seed)
        self._num_shards = int(num_shards)
        self._normalize_options = dict(lowercase=lowercase, keep_accents=keep_accents)
        self._max_sentence_chars = int(max_sentence_chars)
        self._on_undecodable = on_undecodable
        self._empty = Metrics.counter(_NAMESPACE, "documents_skipped_empty")
        self._undecodable = Metrics.counter(_NAMESPACE, "documents_skipped_undecodable")
        self._repaired = Metrics.counter(_NAMESPACE, "documents_repaired")
        self._split = Metrics.counter(_NAMESPACE, "lines_split")
        self._tokens = Metrics.counter(_NAMESPACE, "tokens_encoded")

    def setup(self):
        self._processor = spm.SentencePieceProcessor(model_proto=self._vocab_proto)
        # The original data pipeline split pieces like `▁1990,` (`XLNetTokenizer` does the same).
        self._digit_comma = DigitCommaSplit(self._processor)
        self._seed_bytes = self._seed.to_bytes(8, "little", signed=True)

    def _decoded(self, documents, counts):
        texts = []
        for raw in documents:
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                if self._on_undecodable == "skip":
                    counts["skipped:undecodable"] += 1
                    continue
                texts.append(raw.decode("utf-8", errors="replace"))
                counts["documents_repaired"] += 1
        return texts

    def _sentences(self, texts, counts):
        """Per document, its normalized non-empty sentences (long lines split)."""
        lines = "\n".join(texts).split("\n")
        lines = normalize_lines(lines, **self._normalize_options)
        per_document, start = [], 0
        limit = self._max_sentence_chars
        # One look at the whole batch: documents are checked line by line only when some line is too long.
        any_long = bool(lines) and max(map(len, lines)) > limit
        for text in texts:
            stop = start + text.count("\n") + 1
            sentences = [line for line in lines[start:stop] if line]
            start = stop
            if any_long and sentences and max(map(len, sentences)) > limit:
                pieces = []
                for line in sentences:
                    if len(line) > limit:
                        pieces.extend(split_long_line(line, limit))
                        counts["lines_split"] += 1
                    else:
                        pieces.append(line)
                sentences = pieces
            per_document.append(sentences)
        return per_document

    def _encode(self, sentences):
        """SentencePiece ids of `sentences`, flat: `(ids [T] int32, ids per sentence [S] int64)`."""
        if not sentences:
            return np.zeros([0], np.int32), np.zeros([0], np.int64)
        # One call for the whole batch: SentencePiece's per-call cost is paid once. One thread:
        # parallelism comes from Beam workers, not from inside a DoFn.
        with _cyclic_gc_paused():
            ids = self._processor.encode(sentences, num_threads=1)
            lengths = np.fromiter(map(len, ids), np.int64, len(ids))  # [S]
            tokens = np.fromiter(itertools.chain.from_iterable(ids), np.int32, int(lengths.sum()))  # [T]
            del ids  # freed while paused: the collector never sees them
        return tokens, lengths

    def process(self, documents):
        counts = collections.Counter()
        per_document = self._sentences(self._decoded(documents, counts), counts)
        flat = [sentence for sentences in per_document for sentence in sentences]
        tokens, lengths = self._encode(flat)  # [T], [S]
        tokens, lengths = self._digit_comma.split_flat(tokens, lengths)
        # Token ids leave this step as the records' own varints: fewer bytes through the shuffle than any
        # fixed width, and the write step does not encode them again.
        encoded, offsets = packed_varints(tokens)  # [B], [T+1]
        del tokens
        sentence_counts = np.fromiter(map(len, per_document), np.int64, len(per_document))  # [D]
        document_of_sentence = np.repeat(np.arange(len(per_document)), sentence_counts)  # [S]
        document_tokens = np.bincount(document_of_sentence, lengths, len(per_document)).astype(np.int64)  # [D]
        kept = np.flatnonzero(document_tokens)  # [K]: documents with at least one token
        counts["skipped:empty"] += len(per_document) - kept.size
        # Sentences SentencePiece encoded to nothing are not sentences of the stream.
        nonempty = lengths > 0  # [S]
        document_sentences = np.bincount(document_of_sentence[nonempty], minlength=len(per_document))  # [D]
        digests = np.frombuffer(b"".join(
            hashlib.sha256(self._seed_bytes + "\n".join(per_document[i]).encode("utf-8")).digest() for i in kept
        ), np.uint8).reshape(kept.size, 32)  # [K, 32]
        shards = np.ascontiguousarray(digests[:, :8]).view("<u8")[:, 0] % np.uint64(self._num_shards)  # [K]
        # The batch's documents grouped by shard (stable: batch order within a shard), one element per shard.
        by_shard = np.argsort(shards, kind="stable")  # [K]
        order = kept[by_shard]
        byte_starts = offsets[np.cumsum(document_tokens) - document_tokens]  # [D]
        document_bytes = offsets[np.cumsum(document_tokens)] - byte_starts  # [D]
        shard_bytes = gather_segments(encoded, byte_starts, document_bytes, order)
        sentence_lengths = lengths[nonempty].astype(np.int32)  # [S']
        shard_lengths = gather_segments(sentence_lengths, np.cumsum(document_sentences) - document_sentences,
                                        document_sentences, order)
        keys = digests[by_shard, 8:]  # [K, 24]
        byte_counts = document_bytes[order].astype(np.int32)  # [K]
        sentence_counts = document_sentences[order].astype(np.int32)  # [K]
        byte_ends = np.cumsum(document_bytes[order])  # [K]
        sentence_ends = np.cumsum(document_sentences[order])  # [K]
        shard_ids, firsts = np.unique(shards[by_shard], return_index=True)
        for shard, first, stop in zip(shard_ids.tolist(), firsts.tolist(), [*firsts[1:].tolist(), kept.size]):
            byte_start = int(byte_ends[first - 1]) if first else 0
            sentence_start = int(sentence_ends[first - 1]) if first else 0
            yield int(shard), tuple(DocumentPack(
                keys[first:stop].tobytes(),
                shard_bytes[byte_start:int(byte_ends[stop - 1])].tobytes(),
                byte_counts[first:stop].tobytes(),
                shard_lengths[sentence_start:int(sentence_ends[stop - 1])].tobytes(),
                sentence_counts[first:stop].tobytes(),
            ))
        counts["tokens"] += int(document_tokens.sum())
        self._empty.inc(counts["skipped:empty"])
        self._undecodable.inc(counts["skipped:undecodable"])
        self._repaired.inc(counts["documents_repaired"])
        self._split.inc(counts["lines_split"])
        self._tokens.inc(counts.pop("tokens", 0))
        for key, value in counts.items():
            if value:
                yield beam.pvalue.TaggedOutput("stats", (key, value))


# --------------------------------------------------------------------------- writing


def shard_stream(documents):
    """Concatenates sorted documents into one stream, `<eod>` after each.

    The write step builds this stream with its token ids still varint-encoded
    (`_WriteShard._sorted_stream`); this is its plain form, the layout's reference.

    Args:
        documents: iterable of `(tokens [T] integer, sentence_lengths [S] int32)`.

    Returns:
        `(token_ids [N] int64, sentence_ids [N] int64)`: `sentence_ids` is a bit
        that flips at every sentence and at every `<eod>` (which is its own
        one-token sentence, as in the original data), starting at 0.
    """
    token_parts, length_parts, sentence_counts = [], [], []
    for tokens, lengths in documents:
        token_parts += [np.asarray(tokens, np.int64), np.array([EOD_TOKEN_ID], np.int64)]
        length_parts.append(np.asarray(lengths, np.int32))
        sentence_counts.append(len(lengths))
    if not token_parts:
        return np.zeros([0], np.int64), np.zeros([0], np.int64)
    token_ids = np.concatenate(token_parts)  # [N]
    return token_ids, _sentence_ids(np.concatenate(length_parts), np.array(sentence_counts, np.int64))


def _sentence_ids(sentence_lengths, sentence_counts, dtype=np.int64):
    """The stream's sentence bit `[N]`: documents' sentence lengths `[S]` (`sentence_counts` `[D]` each), and
    after each document its `<eod>`, a sentence of one token. As uint8, a bit is its own varint."""
    sentence_ends = np.cumsum(sentence_counts + 1) - 1  # [D]
    lengths = np.ones(sentence_lengths.size + sentence_counts.size, np.int64)  # [S + D]
    is_sentence = np.ones(lengths.size, bool)
    is_sentence[sentence_ends] = False
    lengths[is_sentence] = sentence_lengths
    bits = (np.arange(lengths.size) % 2).astype(dtype)  # [S + D]
    return np.repeat(bits, lengths)  # [N]


class _WriteShard(beam.DoFn):
    """All `DocumentPack`s of one shard -> its TFRecord file; yields the shard's stats."""

    def __init__(self, output_dir, num_shards, chunk_length):
        self._output_dir = output_dir
        self._num_shards = int(num_shards)
        self._chunk_length = int(chunk_length)
        self._written = Metrics.counter(_NAMESPACE, "documents_written")
        self._records = Metrics.counter(_NAMESPACE, "records_written")
        self._tokens = Metrics.counter(_NAMESPACE, "tokens_written")

    @staticmethod
    def _sorted_stream(packs):
        """The packs' documents sorted by order key (bytewise, as Python sorts bytes), `<eod>` after each.

        Returns:
            `(token varints [B] uint8, sentence_ids [N] uint8, number of documents)`: the `shard_stream`
            of the sorted documents, its ids as varints (a sentence bit is its own varint).
        """
        packs = [DocumentPack._make(pack) for pack in packs]

        def joined(field, dtype):
            return np.frombuffer(b"".join(getattr(pack, field) for pack in packs), dtype)

        # A 24-byte key as three big-endian words compares like the bytes.
        keys = joined("keys", ">u8").reshape(-1, 3)  # [D, 3]
        order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))  # [D]
        byte_counts = joined("byte_counts", np.int32).astype(np.int64)  # [D]
        sentence_counts = joined("sentence_counts", np.int32).astype(np.int64)  # [D]
        eod, _ = packed_varints([EOD_TOKEN_ID])
        data = np.concatenate([joined("token_bytes", np.uint8), eod])  # [B + E]
        # Segments in output order: document, <eod>, document, <eod>, ...
        starts = np.empty(2 * order.size, np.int64)  # [2D]
        counts = np.empty(2 * order.size, np.int64)  # [2D]
        starts[0::2], counts[0::2] = (np.cumsum(byte_counts) - byte_counts)[order], byte_counts[order]
        starts[1::2], counts[1::2] = data.size - eod.size, eod.size
        token_bytes = gather_segments(data, starts, counts, np.arange(starts.size))  # [B']
        lengths = gather_segments(joined("sentence_lengths", np.int32), np.cumsum(sentence_counts) - sentence_counts,
                                  sentence_counts, order)
        return token_bytes, _sentence_ids(lengths, sentence_counts[order], np.uint8), order.size

    def process(self, element):
        shard, grouped = element
        token_bytes, sentence_bits, num_documents = self._sorted_stream(grouped["documents"])
        num_tokens = sentence_bits.size
        name = shard_file_name(shard, self._num_shards)
        # Atomic (temporary name, then rename): a retried or crashed bundle never leaves a half shard
        # under the final name. No TensorFlow import for local paths: it costs each worker seconds of CPU.
        num_records = atomic_files.write_records(
            os.path.join(self._output_dir, name),
            serialize_packed_records(token_bytes, varint_offsets(token_bytes, every=self._chunk_length),
                                     sentence_bits, record_cuts(num_tokens, self._chunk_length)))
        self._written.inc(num_documents)
        self._records.inc(num_records)
        self._tokens.inc(num_tokens)
        yield {"file": name, "num_records": num_records, "num_tokens": num_tokens, "num_documents": num_documents}


class _WriteManifest(beam.DoFn):
    """Shard entries + summed stats -> `manifest.json`; fails the job when the documents do not add up."""

    def __init__(self, output_dir, vocabulary, settings, inputs):
        self._output_dir = output_dir
        self._vocabulary = vocabulary
        self._settings = settings
        self._inputs = inputs

    def process(self, unused_element, shards, stats):
        shards = sorted(shards, key=lambda s: s["file"])
        stats = dict(stats)
        written = sum(s["num_documents"] for s in shards)
        skipped = {reason: int(stats.get(f"skipped:{reason}", 0)) for reason in SKIP_REASONS}
        read = int(stats.get("documents_read", 0))
        if read != written + sum(skipped.values()):
            raise RuntimeError(
                f"Document accounting does not add up: read {read}, written {written}, skipped {skipped}."
            )
        manifest = {
            "format": FORMAT,
            "chunk_length": self._settings["chunk_length"],
            "num_shards": self._settings["num_shards"],
            "shards": [{k: s[k] for k in SHARD_ENTRY_KEYS} for s in shards],
            "num_tokens": sum(s["num_tokens"] for s in shards),
            "num_records": sum(s["num_records"] for s in shards),
            "documents": {"read": read, "written": written, "skipped": skipped,
                          "repaired": int(stats.get("documents_repaired", 0))},
            "files": {"read": int(stats.get("files_read", 0)), "empty": int(stats.get("files_empty", 0))},
            "lines_split": int(stats.get("lines_split", 0)),
            "inputs": self._inputs,
            "vocabulary": self._vocabulary,
            "settings": self._settings,
        }
        # Atomic: a reader (or a resumed job) sees the whole manifest or none, on any gfile filesystem.
        atomic_files.write_json(os.path.join(self._output_dir, MANIFEST), manifest)
        yield manifest


# --------------------------------------------------------------------------- pipeline


def build_pipeline(pipeline, settings, sources, vocab_proto, vocabulary_entry, inputs=()):
    """Adds the job to `pipeline`; returns the PCollection holding the manifest dict.

    `sources` and `inputs` (the manifest's per-file entries) are what `resolve_sources` returns.
    """
    output_dir = settings["output_dir"]
    num_shards = settings["num_shards"]
    read = (
        pipeline
        | "Sources" >> beam.Create(sources)
        # One element per file: without a shuffle a runner may read every file in one bundle.
        | "SpreadSources" >> beam.Reshuffle()
        | "Read" >> beam.ParDo(_ReadDocuments()).with_outputs(
            "stats", "files", main="documents")
    )
    file_stats = (
        read.files
        | "SumPerFile" >> beam.CombinePerKey(sum)
        | "FileStats" >> beam.ParDo(_FileStats())
    )
    tokenized = (
        # Fused with the read: text never crosses a shuffle. Work spreads by source (files, byte
        # ranges, TFDS sub-splits), which `SpreadSources` hands out one by one.
        read.documents
        | "Tokenize" >> beam.ParDo(_TokenizeDocuments(
            vocab_proto,
            seed=settings["seed"],
            num_shards=num_shards,
            lowercase=settings["lowercase"],
            keep_accents=settings["keep_accents"],
            max_sentence_chars=settings["max_sentence_chars"],
            on_undecodable=settings["on_undecodable"],
        )).with_outputs("stats", main="documents")
    )
    # Every shard id gets an element, so a shard that receives no document is still written (empty).
    shard_ids = pipeline | "ShardIds" >> beam.Create([(shard, None) for shard in range(num_shards)])
    shards = (
        {"documents": tokenized.documents, "shard": shard_ids}
        | "GroupShards" >> beam.CoGroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(output_dir, num_shards, settings["chunk_length"]))
    )
    stats = (
        (read.stats, file_stats, tokenized.stats)
        | "MergeStats" >> beam.Flatten()
        | "SumStats" >> beam.CombinePerKey(sum)
    )
    return (
        pipeline
        | "ManifestTrigger" >> beam.Create([None])
        | "WriteManifest" >> beam.ParDo(
            _WriteManifest(output_dir, vocabulary_entry, settings, list(inputs)),
            shards=beam.pvalue.AsList(shards),
            stats=beam.pvalue.AsList(stats),
        )
    )


def _check_settings(settings):
    for key in ("num_shards", "chunk_length", "max_sentence_chars", "tfds_read_shards", "read_range_bytes"):
        if settings[key] < 1:
            raise PipelineInputError(f"--{key.replace('_', '-')} must be >= 1, got {settings[key]}.")
    if settings["on_undecodable"] not in ("skip", "replace"):
        raise PipelineInputError(f"--on-undecodable must be 'skip' or 'replace', got {settings['on_undecodable']!r}.")


def prepare_pretraining_data(inputs, output_dir, vocab, *, num_shards=16, chunk_length=512, seed=0,
                             lowercase=False, keep_accents=False, max_sentence_chars=4096,
                             on_undecodable="skip", tfds_text_feature="text", tfds_data_dir=None,
                             tfds_download=False, tfds_read_shards=1, read_range_bytes=DEFAULT_READ_RANGE_BYTES,
                             shared_filesystem=False, overwrite=False, beam_args=()):
    """Validates inputs, runs the job and waits for it (what `xlnet-tf prepare-pretraining` runs).

    Args:
        inputs: text files or globs (local or any `tf.io.gfile` scheme; one sentence per line, a
            blank line between documents) and/or `tfds:NAME[:SPLIT]` specs.
        output_dir: where the shards and `manifest.json` go.
        vocab: `spiece.model` with XLNet's special ids.
        num_shards: shard files to write.
        chunk_length: tokens per record (not a model setting).
        seed: decides shard assignment and document order.
        lowercase, keep_accents: lowercase before encoding (uncased vocabularies); keep accents
            (otherwise NFKD and drop combining marks).
        max_sentence_chars: longer lines are split at spaces into sentences of at most this many characters.
        on_undecodable: documents with non-UTF-8 bytes: "skip" them (counted) or "replace" the bytes with U+FFFD.
        tfds_text_feature, tfds_data_dir, tfds_download, tfds_read_shards: TFDS inputs' text feature,
            data directory (default: TFDS's own), whether to `download_and_prepare` them first, and
            how many even sub-splits each split is read as.
        read_range_bytes: uncompressed input files larger than this are read as ranges of this many
            bytes, on several workers (each range owns the documents whose first line starts in it).
        shared_filesystem: local paths are on a filesystem every worker mounts (allows them with a
            runner whose workers are other machines).
        overwrite: replace shards and manifest already in `output_dir`.
        beam_args: Beam pipeline options (`--runner DataflowRunner ...`); DirectRunner by default.

    Returns:
        `JobResult(manifest, pipeline_result)`: the manifest written to `output_dir/manifest.json`
        and Beam's result (for `.metrics()`).

    Raises:
        PipelineInputError: on a bad input, vocabulary or setting, before the pipeline starts; also a
            local path with a runner whose workers are other machines (unless `shared_filesystem`).

    Example:
    >>> from xlnet_tf.beam.pretraining_data import prepare_pretraining_data
    >>> job = prepare_pretraining_data(["corpus/*.txt"], "records", "spiece.model",
    ...                                num_shards=2)  # doctest: +SKIP
    >>> job.manifest["num_tokens"]  # doctest: +SKIP
    """
    settings = _job_settings(
        inputs, output_dir, vocab, num_shards=num_shards, chunk_length=chunk_length, seed=seed,
        lowercase=lowercase, keep_accents=keep_accents, max_sentence_chars=max_sentence_chars,
        on_undecodable=on_undecodable, tfds_text_feature=tfds_text_feature, tfds_data_dir=tfds_data_dir,
        tfds_download=tfds_download, tfds_read_shards=tfds_read_shards, read_range_bytes=read_range_bytes,
        shared_filesystem=shared_filesystem)
    options = beam_options(beam_args)
    # Before anything is read or created: a job that cannot work is refused before it is submitted.
    _check_runner_and_paths(options, settings)
    vocab_proto, vocabulary_entry = load_vocabulary(vocab)
    sources, inputs = _resolve_job_sources(settings)
    prepare_output_dir(output_dir, [SHARD_GLOB, MANIFEST], overwrite=overwrite, kind="pretraining")
    settings["beam_args"] = list(beam_args)
    result = run_pipeline(options, lambda pipeline: build_pipeline(
        pipeline, settings, sources, vocab_proto, vocabulary_entry, inputs))
    return JobResult(read_manifest(output_dir), result)


def _job_settings(inputs, output_dir, vocab, **options):
    """The job's checked settings, as the manifest records them: each under its flag's name (dashes as
    underscores), sorted by name; `inputs` under `input`."""
    settings = dict(sorted({"input": list(inputs), "output_dir": output_dir, "vocab": vocab, **options}.items()))
    _check_settings(settings)
    return settings


def _check_runner_and_paths(options, settings):
    """Refuses a runner that is not installed, and local paths its workers cannot reach."""
    local_inputs = [("--input", spec) for spec in settings["input"] if not spec.startswith(TFDS_PREFIX)]
    if len(local_inputs) < len(settings["input"]):
        local_inputs.append(("--tfds-data-dir", settings["tfds_data_dir"] or _default_tfds_data_dir()))
    check_runner_available(options)
    check_paths_for_runner(options, local_inputs + [("--output-dir", settings["output_dir"])],
                           shared_filesystem=settings["shared_filesystem"])


def _resolve_job_sources(settings):
    """`resolve_sources` of the settings' inputs and their reading options."""
    return resolve_sources(settings["input"], **{key: settings[key] for key in (
        "tfds_text_feature", "tfds_data_dir", "tfds_download", "tfds_read_shards", "read_range_bytes")})


def _default_tfds_data_dir():
    tfds = _tfds()

    return tfds.core.constants.DATA_DIR


def read_manifest(output_dir):
    """Loads and checks `output_dir/manifest.json`."""
    tf = _tensorflow()

    path = os.path.join(output_dir, MANIFEST)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"No pretraining manifest at {path!r}.")
    with tf.io.gfile.GFile(path, "r") as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path!r} has format {manifest.get('format')!r}, expected {FORMAT!r}.")
    return manifest
