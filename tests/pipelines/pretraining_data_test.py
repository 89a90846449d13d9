"""Beam pretraining-data job on the in-process FnApiRunner: format, accounting, determinism, bad inputs, TFDS."""

import glob
import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from tests.harness import serialize_stream
from tests.pipelines.no_metrics import NoMetrics
from xlnet_tf.formats import pretraining_records
from xlnet_tf.cli import prepare_pretraining
from xlnet_tf.storage import line_ranges
from xlnet_tf.beam import pretraining_data
from xlnet_tf.beam.pretraining_data import PipelineInputError
from xlnet_tf.beam.runner_options import beam_options
from xlnet_tf.text_normalization import normalize_text
from xlnet_tf.text_normalization import split_long_line

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
VOCAB = os.path.join(TESTDATA, "tiny_spiece.model")
CORPUS = os.path.join(TESTDATA, "tiny_corpus.txt")
EOD = 7


def _documents(path):
    """The corpus's documents as lists of lines (blank line = document break)."""
    with open(path, encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    return [[line for line in block.split("\n") if line.strip()] for block in blocks if block.strip()]


def _run(output_dir, *inputs, extra=()):
    argv = ["--input", *inputs, "--vocab", VOCAB, "--output-dir", str(output_dir), *extra]
    if not any(arg.startswith("--runner") for arg in extra):
        # Named, so a new default of Beam's DirectRunner (Prism) cannot change what is tested.
        argv.append("--runner=FnApiRunner")
    return prepare_pretraining.run(argv)


def _read_shard(path):
    """All records of one shard: a list of (token_ids, sentence_ids) and the feature names seen."""
    records, names = [], set()
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        example = tf.train.Example.FromString(raw)
        names.update(example.features.feature.keys())
        feature = example.features.feature
        records.append((list(feature["token_ids"].int64_list.value), list(feature["sentence_ids"].int64_list.value)))
    return records, names


def _shard_stream(path):
    records, _ = _read_shard(path)
    if not records:
        return [], []
    return [t for r in records for t in r[0]], [s for r in records for s in r[1]]


def _shard_arrays(path):
    records, _ = _read_shard(path)
    tokens = np.array([t for r in records for t in r[0]], np.int64)
    bits = np.array([s for r in records for s in r[1]], np.int64)
    return tokens, bits


def _split_documents(tokens):
    documents, current = [], []
    for token in tokens:
        if token == EOD:
            documents.append(current)
            current = []
        else:
            current.append(token)
    assert current == [], "a shard's stream must end with <eod>"
    return documents


def _shard_bytes(output_dir):
    return {os.path.basename(p): open(p, "rb").read() for p in sorted(glob.glob(f"{output_dir}/*.tfrecord"))}


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("corpus_run")
    job = _run(output_dir, CORPUS, extra=["--num-shards", "3", "--chunk-length", "64", "--seed", "7"])
    return output_dir, job


def test_feature_spec_and_record_lengths(corpus_run):
    output_dir, job = corpus_run
    files = sorted(glob.glob(f"{output_dir}/*.tfrecord"))
    assert [os.path.basename(f) for f in files] == [f"pretrain-0000{i}-of-00003.tfrecord" for i in range(3)]
    spec = {"token_ids": tf.io.VarLenFeature(tf.int64), "sentence_ids": tf.io.VarLenFeature(tf.int64)}
    for path in files:
        records, names = _read_shard(path)
        assert names == {"token_ids", "sentence_ids"}
        assert all(len(t) == len(s) for t, s in records)
        assert all(len(t) == 64 for t, _ in records[:-1]) and 0 < len(records[-1][0]) <= 64
        parsed = next(iter(tf.data.TFRecordDataset(path).map(lambda x: tf.io.parse_single_example(x, spec))))
        assert parsed["token_ids"].dtype == tf.int64


def test_manifest_counts_match_files_and_metrics(corpus_run):
    output_dir, job = corpus_run
    manifest = json.load(open(os.path.join(output_dir, pretraining_records.MANIFEST_FILE)))
    assert manifest == job.manifest
    assert sorted(manifest) == sorted(pretraining_records.MANIFEST_KEYS)
    assert sorted(manifest["vocabulary"]) == sorted(pretraining_records.VOCABULARY_ENTRY_KEYS)
    assert all(sorted(entry) == sorted(pretraining_records.SHARD_ENTRY_KEYS) for entry in manifest["shards"])
    documents = _documents(CORPUS)
    assert manifest["format"] == "xlnet_tf.pretraining.v1"
    assert (manifest["chunk_length"], manifest["num_shards"]) == (64, 3)
    assert manifest["documents"] == {"read": len(documents), "written": len(documents),
                                     "skipped": {"empty": 0, "undecodable": 0}, "repaired": 0}
    total = 0
    for shard in manifest["shards"]:
        records, _ = _read_shard(os.path.join(output_dir, shard["file"]))
        assert shard["num_records"] == len(records)
        assert shard["num_tokens"] == sum(len(t) for t, _ in records)
        total += shard["num_tokens"]
    assert manifest["num_tokens"] == total
    with open(VOCAB, "rb") as f:
        vocab_bytes = f.read()
    assert manifest["vocabulary"]["sha256"] == hashlib.sha256(vocab_bytes).hexdigest()
    assert manifest["vocabulary"]["vocabulary_size"] == 200
    assert manifest["vocabulary"]["special_ids"]["eod"] == EOD
    settings = manifest["settings"]
    assert (settings["seed"], settings["chunk_length"], settings["input"]) == (7, 64, [CORPUS])
    counters = {r.key.metric.name: r.committed for r in job.pipeline_result.metrics().query()["counters"]}
    assert counters["documents_read"] == counters["documents_written"] == len(documents)
    assert counters["tokens_written"] == total
    assert counters.get("documents_skipped_empty", 0) == counters.get("documents_skipped_undecodable", 0) == 0


def test_streams_hold_every_document_once_with_sentence_bits(corpus_run):
    output_dir, _ = corpus_run
    processor = spm.SentencePieceProcessor(model_file=VOCAB)
    expected = sorted(
        tuple(processor.decode(processor.encode(normalize_text(line))) for line in doc) for doc in _documents(CORPUS)
    )
    found = []
    for path in sorted(glob.glob(f"{output_dir}/*.tfrecord")):
        tokens, bits = _shard_stream(path)
        # The bit flips exactly at sentence boundaries and at every <eod> (its own sentence).
        position = 0
        bit = 0
        for document in _split_documents(tokens):
            sentences, current = [], []
            for token, token_bit in zip(document, bits[position:position + len(document)]):
                if token_bit != bit:
                    sentences.append(current)
                    current, bit = [], token_bit
                current.append(token)
            sentences.append(current)
            position += len(document)
            assert bits[position] == 1 - bit  # <eod>
            bit = bits[position]
            position += 1
            bit = 1 - bit
            found.append(tuple(processor.decode(s) for s in sentences))
        assert bits[0] == 0
    assert sorted(found) == expected


def test_same_seed_same_bytes_other_seed_other_order(corpus_run, tmp_path):
    output_dir, _ = corpus_run
    again = _run(tmp_path / "again", CORPUS, extra=["--num-shards", "3", "--chunk-length", "64", "--seed", "7"])
    assert _shard_bytes(output_dir) == _shard_bytes(tmp_path / "again")
    assert again.manifest["shards"] == json.load(open(os.path.join(output_dir, "manifest.json")))["shards"]
    _run(tmp_path / "other", CORPUS, extra=["--num-shards", "3", "--chunk-length", "64", "--seed", "8"])
    assert _shard_bytes(output_dir) != _shard_bytes(tmp_path / "other")

    def all_documents(directory):
        docs = []
        for path in sorted(glob.glob(f"{directory}/*.tfrecord")):
            docs.extend(tuple(d) for d in _split_documents(_shard_stream(path)[0]))
        return docs

    original, reseeded = all_documents(output_dir), all_documents(tmp_path / "other")
    assert original != reseeded and sorted(original) == sorted(reseeded)


def test_file_names_do_not_change_the_bytes(corpus_run, tmp_path):
    # Keys are document contents: the same text split over differently named files gives the same shards.
    output_dir, _ = corpus_run
    documents = _documents(CORPUS)
    half = len(documents) // 2
    for name, part in (("zz_second.txt", documents[half:]), ("aa_first.txt", documents[:half])):
        (tmp_path / name).write_text("\n\n".join("\n".join(d) for d in part) + "\n", encoding="utf-8")
    _run(tmp_path / "out", str(tmp_path / "*.txt"), extra=["--num-shards", "3", "--chunk-length", "64", "--seed", "7"])
    assert _shard_bytes(output_dir) == _shard_bytes(tmp_path / "out")


@pytest.mark.slow
def test_bad_inputs_are_counted_and_handled(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "empty.txt").write_bytes(b"")
    (inputs / "blank_lines_only.txt").write_bytes(b"\n\n   \n")
    (inputs / "mixed.txt").write_bytes(
        b"The garden opens.\nA quiet river.\n\n"  # good
        b"Bad \xff\xfe bytes here.\nStill the same document.\n\n"  # undecodable
        b"\xcc\x81\xcc\x82\n\n"  # only combining marks: empty after normalization
        b"The museum writes.\r\n"  # CRLF is whitespace
    )
    long_line = " ".join(["table"] * 1_710_000)  # > 10 MB in one line ("▁table" is one piece: 1.7M tokens)
    assert len(long_line) > 10_000_000
    (inputs / "long.txt").write_text("Her brother reads.\n" + long_line + "\n", encoding="utf-8")
    with gzip.open(inputs / "compressed.txt.gz", "wt", encoding="utf-8") as f:
        f.write("Some farmers answer.\n\nThe red fox moves.\n")
    job = _run(tmp_path / "out", str(inputs / "*"), extra=["--num-shards", "2", "--chunk-length", "512"])
    manifest = job.manifest
    assert manifest["documents"] == {"read": 7, "written": 5, "skipped": {"empty": 1, "undecodable": 1},
                                     "repaired": 0}
    assert manifest["files"] == {"read": 5, "empty": 2}
    # How each file was read: the .gz one whole (it cannot be entered mid-stream), and why.
    assert [sorted(entry) for entry in manifest["inputs"]] == [sorted(pretraining_records.INPUT_ENTRY_KEYS)] * 5
    entries = {os.path.basename(entry["file"]): entry for entry in manifest["inputs"]}
    assert entries["compressed.txt.gz"]["read_whole"] == line_ranges.COMPRESSED
    assert entries["mixed.txt"] == {"file": str(inputs / "mixed.txt"), "ranges": 1, "read_whole": None}
    expected_pieces = split_long_line(long_line, 4096)
    assert manifest["lines_split"] == 1
    counters = {r.key.metric.name: r.committed for r in job.pipeline_result.metrics().query()["counters"]}
    assert counters["documents_skipped_undecodable"] == counters["documents_skipped_empty"] == 1
    assert counters["files_empty"] == 2

    # The 10 MB line became len(expected_pieces) sentences of its document, each sentence whole.
    processor = spm.SentencePieceProcessor(model_file=VOCAB)
    longest = None
    for path in glob.glob(f"{tmp_path / 'out'}/*.tfrecord"):
        tokens, bits = _shard_arrays(path)
        ends = np.flatnonzero(tokens == EOD)
        starts = np.concatenate([[0], ends[:-1] + 1])
        for start, end in zip(starts, ends):
            if longest is None or end - start > longest[0].size:
                longest = (tokens[start:end], bits[start:end])
    tokens, bits = longest
    cuts = np.flatnonzero(np.diff(bits)) + 1
    sentences = [processor.decode(part.tolist()) for part in np.split(tokens, cuts)]
    assert sentences == ["Her brother reads."] + expected_pieces

    replaced = _run(tmp_path / "replace", str(inputs / "mixed.txt"), extra=["--on-undecodable", "replace"])
    assert replaced.manifest["documents"] == {"read": 4, "written": 3, "skipped": {"empty": 1, "undecodable": 0},
                                              "repaired": 1}


def test_more_shards_than_documents_writes_empty_shards(tmp_path):
    (tmp_path / "one.txt").write_text("The garden opens.\n", encoding="utf-8")
    manifest = _run(tmp_path / "out", str(tmp_path / "one.txt"), extra=["--num-shards", "4"]).manifest
    assert len(glob.glob(f"{tmp_path / 'out'}/pretrain-*-of-00004.tfrecord")) == 4
    assert sorted(s["num_records"] for s in manifest["shards"]) == [0, 0, 0, 1]


def test_missing_path_fails_before_the_pipeline(tmp_path):
    missing = str(tmp_path / "nowhere" / "*.txt")
    with pytest.raises(PipelineInputError, match=r"Input '.*nowhere/\*\.txt' matches no file"):
        _run(tmp_path / "out", CORPUS, missing)
    assert not os.path.exists(tmp_path / "out")
    code = prepare_pretraining.main(["--input", missing, "--vocab", VOCAB, "--output-dir", str(tmp_path / "out")])
    assert code == 2
    from xlnet_tf.cli import main as cli

    code = cli.main(["prepare-pretraining", "--input", missing, "--vocab", VOCAB, "--output-dir", str(tmp_path / "o")])
    assert code == 2


def test_bad_vocabulary_and_settings(tmp_path):
    with pytest.raises(PipelineInputError, match="Vocabulary '.*nope.model' does not exist"):
        prepare_pretraining.run(["--input", CORPUS, "--vocab", str(tmp_path / "nope.model"), "--output-dir",
                                 str(tmp_path / "out")])
    import io

    plain = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_documents(CORPUS)[0] * 20), model_writer=plain,
                                   vocab_size=80, minloglevel=2, hard_vocab_limit=False)
    (tmp_path / "plain.model").write_bytes(plain.getvalue())
    with pytest.raises(PipelineInputError, match="id 3 is '.*', expected '<cls>'"):
        prepare_pretraining.run(["--input", CORPUS, "--vocab", str(tmp_path / "plain.model"), "--output-dir",
                                 str(tmp_path / "out")])
    with pytest.raises(PipelineInputError, match="--num-shards must be >= 1"):
        _run(tmp_path / "out", CORPUS, extra=["--num-shards", "0"])


def test_existing_output_needs_overwrite(corpus_run):
    output_dir, _ = corpus_run
    with pytest.raises(PipelineInputError, match="already holds 4 pretraining file"):
        _run(output_dir, CORPUS)


def test_tfds_input_with_mock_data(tmp_path):
    import tensorflow_datasets as tfds

    texts = [b"The garden opens.\n\nA quiet river moves.", b"", b"Bad \xff bytes.", b"Her brother reads."]

    def as_dataset(self, split, *args, **kwargs):
        del self, split, args, kwargs
        return tf.data.Dataset.from_tensor_slices({"text": texts, "label": [0, 1, 0, 1]})

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        with pytest.raises(PipelineInputError, match="no feature 'body'"):
            _run(tmp_path / "bad", "tfds:imdb_reviews", extra=["--tfds-text-feature", "body", "--tfds-download"])
        job = _run(tmp_path / "out", "tfds:imdb_reviews:train", extra=["--tfds-download", "--num-shards", "2"])
    assert job.manifest["documents"] == {"read": 4, "written": 2, "skipped": {"empty": 1, "undecodable": 1},
                                         "repaired": 0}
    processor = spm.SentencePieceProcessor(model_file=VOCAB)
    found = []
    for path in glob.glob(f"{tmp_path / 'out'}/*.tfrecord"):
        found.extend(processor.decode(d) for d in _split_documents(_shard_stream(path)[0]))
    # One example is one document; its blank line is a paragraph gap, not a document break.
    assert sorted(found) == ["Her brother reads.", "The garden opens. A quiet river moves."]


def test_unknown_tfds_dataset_is_named(tmp_path):
    with pytest.raises(PipelineInputError, match="TFDS dataset 'no_such_dataset_xyz' cannot be loaded"):
        _run(tmp_path / "out", "tfds:no_such_dataset_xyz")


def test_shard_stream_golden():
    tokens, bits = pretraining_data.shard_stream([
        (np.array([10, 11, 12], np.int32), np.array([2, 1], np.int32)),
        (np.array([20], np.int32), np.array([1], np.int32)),
    ])
    assert tokens.tolist() == [10, 11, 12, 7, 20, 7]
    assert bits.tolist() == [0, 0, 1, 0, 1, 0]


def test_unknown_arguments_go_to_beam_unchanged():
    from apache_beam.options.pipeline_options import DirectOptions
    from apache_beam.options.pipeline_options import GoogleCloudOptions
    from apache_beam.options.pipeline_options import StandardOptions

    options = beam_options([])
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    options = beam_options(["--direct_num_workers", "2"])
    assert options.view_as(DirectOptions).direct_num_workers == 2
    assert options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    options = beam_options(["--direct_num_workers=2", "--direct_running_mode=multi_threading"])
    assert options.view_as(DirectOptions).direct_running_mode == "multi_threading"
    options = beam_options(["--runner", "DataflowRunner", "--project", "p", "--region", "r"])
    assert options.view_as(StandardOptions).runner == "DataflowRunner"
    assert options.view_as(GoogleCloudOptions).project == "p"
    args, rest = prepare_pretraining._parser().parse_known_args(
        ["--input", "a.txt", "--vocab", "v", "--output-dir", "o", "--num_workers", "3", "--in", "x"])
    assert args.input == ["a.txt"] and rest == ["--num_workers", "3", "--in", "x"]


def test_serialized_records_parse_as_tf_examples():
    values = np.array([0, 1, 127, 128, 255, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**32 - 1, 31999])
    bits = np.arange(values.size) % 2
    records = serialize_stream(values, bits, 5)
    assert len(records) == 3
    for i, record in enumerate(records):
        feature = tf.train.Example.FromString(record).features.feature
        assert sorted(feature.keys()) == ["sentence_ids", "token_ids"]
        assert list(feature["token_ids"].int64_list.value) == values[5 * i:5 * i + 5].tolist()
        assert list(feature["sentence_ids"].int64_list.value) == bits[5 * i:5 * i + 5].tolist()
    # The job's path: ids varint-encoded early, offsets recovered from the bytes alone.
    encoded, offsets = pretraining_records.packed_varints(values)
    assert pretraining_records.varint_offsets(encoded).tolist() == offsets.tolist()
    cuts = pretraining_records.record_cuts(values.size, 5)
    assert cuts.tolist() == [0, 5, 10, 13]
    assert pretraining_records.varint_offsets(encoded, every=5).tolist() == offsets[cuts].tolist()
    assert pretraining_records.serialize_packed_records(
        encoded, pretraining_records.varint_offsets(encoded, every=5), bits.astype(np.uint8), cuts) == records
    with pytest.raises(ValueError, match="token_cuts has 4 cuts and sentence_cuts 3"):
        pretraining_records.serialize_packed_records(encoded, cuts, bits.astype(np.uint8), cuts[:3])
    assert serialize_stream(np.zeros([0], np.int64), np.zeros([0], np.int64), 4) == []
    with pytest.raises(ValueError, match=r"ids must be in \[0, 2\*\*32\)"):
        serialize_stream(np.array([-1]), np.array([0]), 4)


def _pack(documents):
    """A DocumentPack (as the tokenize step yields it) of `(key, tokens, sentence_lengths)` documents."""
    encoded = [pretraining_records.packed_varints(tokens)[0] for _, tokens, _ in documents]
    return (b"".join(key for key, _, _ in documents), b"".join(e.tobytes() for e in encoded),
            np.array([e.size for e in encoded], np.int32).tobytes(),
            np.concatenate([np.asarray(n, np.int32) for _, _, n in documents]).tobytes(),
            np.array([len(n) for _, _, n in documents], np.int32).tobytes())


def test_write_step_sorts_packed_documents_by_key_bytes():
    # Keys that differ only in later bytes, or only by trailing zeros, and ids of every varint width.
    first = (b"\x00" * 23 + b"\x01", [3, 70000, 2**21], [1, 2])
    second = (b"\x00" * 23 + b"\x02", [128], [1])
    third = (b"\x01" + b"\x00" * 23, [2**31, 5], [2])
    fourth = (b"\x00" * 24, [9], [1])
    packs = [_pack([third, first]), _pack([second]), _pack([fourth])]
    token_bytes, sentence_bits, count = pretraining_data._WriteShard._sorted_stream(packs)
    documents = sorted([first, second, third, fourth], key=lambda document: document[0])
    expected_tokens, expected_bits = pretraining_data.shard_stream((np.array(t), np.array(n)) for _, t, n in documents)
    assert count == 4
    assert sentence_bits.dtype == np.uint8 and sentence_bits.tolist() == expected_bits.tolist()
    assert pretraining_records.serialize_packed_records(
        token_bytes, pretraining_records.varint_offsets(token_bytes, every=3),
        sentence_bits, pretraining_records.record_cuts(sentence_bits.size, 3),
    ) == serialize_stream(expected_tokens, expected_bits, 3)
    # No documents: an empty stream (an empty shard file).
    token_bytes, sentence_bits, count = pretraining_data._WriteShard._sorted_stream([])
    assert (token_bytes.size, sentence_bits.size, count) == (0, 0, 0)
    assert pretraining_records.varint_offsets(token_bytes, every=3).tolist() == [0]


def test_write_step_peak_memory_per_token_is_bounded():
    # What the module docstring promises for sizing --num-shards: the write step's peak is under 14 bytes per
    # token (its input packs, the sorted stream and the serialized records), not an offset per token.
    import tracemalloc

    rng = np.random.default_rng(0)
    documents = []
    for _ in range(2000):
        count = int(rng.integers(100, 900))
        lengths = np.full(count // 20, 20, np.int32)
        lengths[-1] += count - lengths.sum()
        documents.append((rng.bytes(24), np.minimum(rng.zipf(1.2, count), 31999), lengths))
    packs = [_pack(documents[i:i + 200]) for i in range(0, len(documents), 200)]
    num_tokens = sum(len(tokens) + 1 for _, tokens, _ in documents)  # each document and its <eod>
    pack_bytes = sum(len(part) for pack in packs for part in pack)
    tracemalloc.start()
    try:
        token_bytes, sentence_bits, _ = pretraining_data._WriteShard._sorted_stream(packs)
        records = pretraining_records.serialize_packed_records(
            token_bytes, pretraining_records.varint_offsets(token_bytes, every=512),
            sentence_bits, pretraining_records.record_cuts(sentence_bits.size, 512))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(records) == -(-num_tokens // 512)
    assert (pack_bytes + peak) / num_tokens < 14


@pytest.mark.parametrize("every", [1, 7, 512])
def test_record_cuts_found_block_by_block_equal_every_offset(every):
    # Over 1 MiB of varints of every width: the blockwise search crosses block edges inside values.
    rng = np.random.default_rng(every)
    values = (rng.integers(0, 2**32, 700_000, dtype=np.uint64) >> rng.integers(0, 32, 700_000).astype(np.uint64))
    encoded, offsets = pretraining_records.packed_varints(values)
    assert encoded.size > 1 << 20  # more than one block
    cuts = pretraining_records.record_cuts(values.size, every)
    assert pretraining_records.varint_offsets(encoded, every=every).tolist() == offsets[cuts].tolist()


def test_gather_segments():
    values = np.arange(10, 20)
    assert pretraining_data.gather_segments(values, [0, 4, 7], [2, 3, 0], [1, 2, 0]).tolist() == [14, 15, 16, 10, 11]
    assert pretraining_data.gather_segments(values, [0], [3], np.array([], np.int64)).tolist() == []


# sha256 of the shards' bytes (in file-name order) on fixed corpora, taken before the reading and
# encoding steps were reworked: those steps must never change what is written.
_PINNED_SHARDS = "25f357e57eadfcf5f5e5f98052d7e017cd2b74e83bb9d7b3f08c479218b23017"
_PINNED_RICH_SHARDS = "1c86e179232e5139a19bb2f6802e8502ad3d8c9cf247f06bdca4e9509de98d26"


def _shards_sha256(output_dir):
    digest = hashlib.sha256()
    for _, data in sorted(_shard_bytes(output_dir).items()):
        digest.update(data)
    return digest.hexdigest()


def _rich_corpus(path):
    """The tiny corpus between two blocks of accents, LaTeX quotes, digit-commas, CRLF, a long line, blank runs."""
    extra = ("Caf\u00e9 ``na\u00efve'' r\u00e9sum\u00e9 in 1990, 2001, and 12,345.\r\n"
             "  spaced \t out   line   \n" + " ".join(["table"] * 40) + "\n\n   \n\n")
    with open(CORPUS, encoding="utf-8") as f:
        text = extra + f.read().rstrip("\n") + "\n\n" + extra
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def test_shard_bytes_are_pinned(corpus_run, tmp_path):
    output_dir, _ = corpus_run
    assert _shards_sha256(output_dir) == _PINNED_SHARDS
    _rich_corpus(tmp_path / "rich.txt")
    _run(tmp_path / "out", str(tmp_path / "rich.txt"), extra=["--num-shards", "2", "--chunk-length", "48",
                                                               "--seed", "3", "--max-sentence-chars", "50"])
    assert _shards_sha256(tmp_path / "out") == _PINNED_RICH_SHARDS


def test_byte_ranges_give_the_same_shards_and_counts(corpus_run, tmp_path):
    # A 39 kB file read as 39 ranges of 1000 bytes (cuts inside documents and inside lines).
    output_dir, job = corpus_run
    ranged = _run(tmp_path / "ranged", CORPUS, extra=["--num-shards", "3", "--chunk-length", "64", "--seed", "7",
                                                     "--read-range-bytes", "1000"])
    assert _shard_bytes(tmp_path / "ranged") == _shard_bytes(output_dir)
    assert ranged.manifest["documents"] == job.manifest["documents"]
    assert ranged.manifest["files"] == {"read": 1, "empty": 0}
    assert ranged.manifest["settings"]["read_range_bytes"] == 1000
    assert ranged.manifest["inputs"] == [{"file": CORPUS, "ranges": -(-os.path.getsize(CORPUS) // 1000),
                                          "read_whole": None}]
    assert job.manifest["inputs"] == [{"file": CORPUS, "ranges": 1, "read_whole": None}]


def test_manifest_counts_hold_without_metrics(monkeypatch, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "mixed.txt").write_bytes(
        b"The garden opens.\n\nBad \xff bytes.\n\n\xcc\x81\n\nThe museum writes.\n")
    (tmp_path / "in" / "empty.txt").write_bytes(b"")
    monkeypatch.setattr(pretraining_data, "Metrics", NoMetrics)
    job = _run(tmp_path / "out", str(tmp_path / "in" / "*.txt"), extra=["--num-shards", "2"])
    counters = [r for r in job.pipeline_result.metrics().query()["counters"]
                if r.key.metric.namespace == "xlnet_pretraining"]
    assert counters == []
    assert job.manifest["documents"] == {"read": 4, "written": 2, "skipped": {"empty": 1, "undecodable": 1},
                                         "repaired": 0}
    assert job.manifest["files"] == {"read": 2, "empty": 1}


def test_job_fails_when_documents_do_not_add_up(monkeypatch, tmp_path):
    # A tokenize step that loses documents without counting them (its first shard's pack): the job must fail.
    process = pretraining_data._TokenizeDocuments.process

    def losing(self, documents):
        outputs = list(process(self, documents))
        return outputs[1:]

    monkeypatch.setattr(pretraining_data._TokenizeDocuments, "process", losing)
    (tmp_path / "three.txt").write_text("The garden opens.\n\nA quiet river.\n\nHer brother reads.\n")
    with pytest.raises(Exception, match=r"Document accounting does not add up: read 3, written [0-2],"):
        _run(tmp_path / "out", str(tmp_path / "three.txt"), extra=["--num-shards", "2"])
    assert not os.path.exists(tmp_path / "out" / "manifest.json")


def test_tfds_sub_splits_give_the_same_shards(tmp_path):
    # A real (tiny, local) TFDS dataset, since mock data ignores sub-split slicing: each even sub-split is
    # its own read, and together they hold every example once.
    import tensorflow_datasets as tfds

    class TinyTexts(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            features = tfds.features.FeaturesDict({"text": tfds.features.Text()})
            return tfds.core.DatasetInfo(builder=self, features=features)

        def _split_generators(self, dl_manager):
            del dl_manager
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for index, document in enumerate(_documents(CORPUS)[:40]):
                yield index, {"text": "\n".join(document)}

    data_dir = str(tmp_path / "tfds")
    TinyTexts(data_dir=data_dir).download_and_prepare()
    common = ["--tfds-data-dir", data_dir, "--num-shards", "2", "--chunk-length", "64"]
    whole = _run(tmp_path / "whole", "tfds:tiny_texts:train", extra=common)
    parts = _run(tmp_path / "parts", "tfds:tiny_texts:train", extra=common + ["--tfds-read-shards", "3"])
    assert whole.manifest["documents"]["read"] == parts.manifest["documents"]["read"] == 40
    assert _shard_bytes(tmp_path / "parts") == _shard_bytes(tmp_path / "whole")
    sub_splits = pretraining_data._resolve_tfds("tfds:tiny_texts:train", "text", data_dir, False, 3)
    assert len(sub_splits) == 3


@pytest.mark.subprocess
def test_worker_path_imports_no_tensorflow(tmp_path):
    # What a worker process runs (read, tokenize, write a shard), in a fresh interpreter: TensorFlow and
    # Keras cost every worker seconds of CPU to import, so none of it may load them.
    code = (
        "import sys\n"
        "from xlnet_tf.beam import pretraining_data as job\n"
        f"proto = open({VOCAB!r}, 'rb').read()\n"
        f"batches = [b for b in job._ReadDocuments().process(('file', {CORPUS!r}, 0, None)) if isinstance(b, list)]\n"
        "tokenize = job._TokenizeDocuments(proto, seed=0, num_shards=1, lowercase=False, keep_accents=False,\n"
        "                                  max_sentence_chars=4096, on_undecodable='skip')\n"
        "tokenize.setup()\n"
        "documents = [d[1] for b in batches for d in tokenize.process(b) if isinstance(d, tuple) and d[0] == 0]\n"
        f"(entry,) = job._WriteShard({str(tmp_path)!r}, 1, 64).process((0, {{'documents': documents}}))\n"
        "print(entry['num_documents'],\n"
        "      sorted(m for m in ('tensorflow', 'keras', 'tensorflow_text') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split()[-1] == "[]", result.stdout + result.stderr
    assert int(result.stdout.split()[0]) == len(_documents(CORPUS))
    # The shard it wrote is a TFRecord file TensorFlow reads back.
    (path,) = glob.glob(str(tmp_path / "*.tfrecord"))
    assert sum(1 for _ in tf.data.TFRecordDataset(path)) == -(-sum(len(t) for t, _ in _read_shard(path)[0]) // 64)


def test_tokenize_step_pauses_the_collector_only_while_encoding():
    # SentencePiece's per-sentence lists are freed before the collector is back on, and the caller's setting is
    # restored either way.
    import gc

    step = pretraining_data._TokenizeDocuments(open(VOCAB, "rb").read(), seed=0, num_shards=2, lowercase=False,
                                               keep_accents=False, max_sentence_chars=4096, on_undecodable="skip")
    step.setup()
    processor = step._processor
    seen = []

    class Recording:
        def encode(self, sentences, **kwargs):
            seen.append(gc.isenabled())
            return processor.encode(sentences, **kwargs)

    step._processor = Recording()
    sentences = ["Hello world.", "A second, longer sentence here.", "x"]
    expected = processor.encode(sentences)
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            tokens, lengths = step._encode(sentences)
            after = gc.isenabled()
        finally:
            gc.enable()
        assert after is enabled
        assert tokens.tolist() == [i for ids in expected for i in ids]
        assert lengths.tolist() == [len(ids) for ids in expected]
    assert seen == [False, False]
