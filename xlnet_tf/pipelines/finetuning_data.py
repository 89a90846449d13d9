"""Apache Beam job: JSONL / CSV / SQuAD JSON / TFDS -> XLNet fine-tuning TFRecords.

`xlnet-tf prepare-finetuning --task-type classification --input train=train.jsonl --input validation=dev.csv
 --vocab spiece.model --sequence-length 128 --output-dir DIR`
`xlnet-tf prepare-finetuning --task-type classification --tfds glue/sst2 --tfds-splits train,validation ...`
(the command is `xlnet_tf.cli.prepare_finetuning`; `prepare_finetuning_data` runs the job)

Writes the format specified in `xlnet_tf/formats/README.md` ("xlnet_tf.finetuning.v1"): per split,
`{split}-SSSSS-of-NNNNN.tfrecord` shards of `tf.train.Example`s holding the packer's outputs
(`token_ids`, `segment_ids`, `padding_mask`, int64 `[L]`; `[S*L]`, S segments flattened, for a
long-document task with `--max-segments` S > 1), the label (`label`; `labels` `[L]` for
token classification; `start_position`, `end_position`, `is_impossible` for spans),
`example_id` (plus `window_index` for spans; `truncated`, 1 when packing cut the example, for
classification and regression), and `manifest.json` (with `max_segments`). Read them back with
`xlnet_tf.data.finetuning_record_dataset.finetuning_record_dataset`.

Tokenization and packing are the fine-tuning input pipeline's own, run inside a `tf.function`
(`XLNetTokenizer` + `XLNetPacker`; `XLNetSquadPreprocessor` for spans; the word -> first-piece
label rule of `xlnet_tf.data.finetuning` for token classification), so records equal what
`xlnet_tf.data.finetuning.finetuning_dataset` feeds the model.

Inputs (columns renamed with `--text-fields` / `--label-field`):
- classification / regression: JSONL or CSV/TSV with `text`, optional `text_pair`, `label`;
  string labels map through `--label-names` (default: the sorted distinct labels of the first split);
- token_classification: JSONL with `tokens` (list of words) and `tags` (ids or names);
- span: SQuAD-format JSON (one record per window; document stride for long passages);
- TFDS by name (`--tfds glue/mrpc`), using the column layout of `xlnet_tf.data.finetuning_tasks`.

Skipped examples are counted by reason (Beam counters and the manifest), never silently dropped:
`undecodable` (a line that is not UTF-8 / not JSON), `missing_field`, `empty` (no text),
`bad_label` (not a known class, not a number). `--strict` turns any skip into an error.

Determinism: an example's id is `{split}-{index:09d}` (index = position in its input, files in the
order given); its shard is SHA-256(seed, id) mod `num_shards`, and each shard is written by one
DoFn call, sorted by id. Same inputs and settings give byte-identical files on any runner.
"""

import csv
import hashlib
import io
import json
import os

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from xlnet_tf.formats.finetuning_records import EXAMPLE_ID_KEY
from xlnet_tf.formats.finetuning_records import FEATURE_KEYS
from xlnet_tf.formats.finetuning_records import FORMAT
from xlnet_tf.formats.finetuning_records import LABEL_KEY
from xlnet_tf.formats.finetuning_records import LABELS_KEY
from xlnet_tf.formats.finetuning_records import MANIFEST_FILE as MANIFEST
from xlnet_tf.formats.finetuning_records import SHARD_COUNTS_FILE
from xlnet_tf.formats.finetuning_records import SHARD_SUFFIX
from xlnet_tf.formats.finetuning_records import SPAN_LABEL_KEYS
from xlnet_tf.formats.finetuning_records import TRUNCATED_KEY
from xlnet_tf.formats.finetuning_records import WINDOW_INDEX_KEY
from xlnet_tf.formats.finetuning_records import shard_file_name
from xlnet_tf.pipelines.pipeline_input_error import PipelineInputError

SKIP_REASONS = ("undecodable", "missing_field", "empty", "bad_label")
_NAMESPACE = "xlnet_finetuning"


def _shard_of(example_id, seed, num_shards):
    digest = hashlib.sha256(f"{seed}:{example_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % num_shards


# --------------------------------------------------------------------------- reading


def _skip(reason, settings, where):
    if settings["strict"]:
        raise ValueError(f"{where}: {reason.replace('_', ' ')} (drop --strict to skip and count such examples).")
    Metrics.counter(_NAMESPACE, f"skipped_{reason}").inc()


def _is_int(value):
    try:
        return float(value) == int(float(value)) and "." not in str(value)
    except (TypeError, ValueError):
        return False


def _label(value, settings):
    """Class id / float / None (bad) for a raw label value."""
    kind, names = settings["task_type"], settings["label_names"]
    if kind == "regression":
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if number == number else None
    if names:
        if str(value) in names:
            return names.index(str(value))
        if _is_int(value) and 0 <= int(value) < len(names):
            return int(value)
        return None
    if not _is_int(value) or int(value) < 0:
        return None
    return int(value)


def _rows(path):
    """(line number, dict | None) of a JSONL / CSV / TSV file; None = undecodable line."""
    import tensorflow as tf

    lower = path.lower()
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    if lower.endswith((".csv", ".tsv")):
        try:
            text, repaired = data.decode("utf-8"), False
        except UnicodeDecodeError:
            # Only rows that hold a replaced byte are undecodable; the rest are kept.
            text, repaired = data.decode("utf-8", errors="replace"), True
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if lower.endswith(".tsv") else ",")
        for number, row in enumerate(reader, start=2):
            bad = repaired and any("\ufffd" in v for v in row.values() if isinstance(v, str))
            yield number, None if bad else row
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            yield number, None
            continue
        yield number, row if isinstance(row, dict) else None


def _canonical_text_example(row, settings, where):
    """Canonical `{"text", "text_pair"?, "label"}` of one row, or None after counting a skip."""
    fields = settings["text_fields"]
    if any(row.get(name) is None for name in fields[:1] + [settings["label_field"]]):
        _skip("missing_field", settings, where)
        return None
    text = str(row[fields[0]])
    pair = None if len(fields) < 2 or row.get(fields[1]) is None else str(row[fields[1]])
    if not text.strip() and not (pair or "").strip():
        _skip("empty", settings, where)
        return None
    label = _label(row[settings["label_field"]], settings)
    if label is None:
        _skip("bad_label", settings, where)
        return None
    example = {"text": text, "label": label}
    if len(fields) > 1:
        example["text_pair"] = pair or ""
    return example


def _canonical_token_example(row, settings, where):
    tokens, tags = row.get("tokens"), row.get(settings["label_field"] or "tags")
    if not isinstance(tokens, list) or not isinstance(tags, list):
        _skip("missing_field", settings, where)
        return None
    if not tokens:
        _skip("empty", settings, where)
        return None
    ids = [_label(tag, settings) for tag in tags]
    if len(ids) != len(tokens) or any(i is None for i in ids):
        _skip("bad_label", settings, where)
        return None
    return {"tokens": [str(t) for t in tokens], "tags": ids}


def _squad_examples(path, settings):
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        try:
            data = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a SQuAD-format JSON file ({e}).") from None
    for article in data.get("data", []):
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                where = f"{path}: question {qa.get('id')!r}"
                if not context or not qa.get("question"):
                    _skip("empty" if context == "" else "missing_field", settings, where)
                    yield None
                    continue
                answers = qa.get("answers") or []
                impossible = bool(qa.get("is_impossible", False)) or not answers
                first = answers[0] if answers else {"text": "", "answer_start": 0}
                yield {"context": context, "question": qa["question"], "answer_text": "" if impossible else first["text"],
                       "answer_start": 0 if impossible else int(first["answer_start"]), "is_impossible": impossible}


class ReadSource(beam.DoFn):
    """(split, source) -> (example_id, canonical example); counts reads and skips."""

    def __init__(self, settings):
        self._settings = settings

    def process(self, element):
        split, kind, location = element
        settings = self._settings
        read = Metrics.counter(_NAMESPACE, "read")
        index = 0
        for example in self._examples(kind, location, settings):
            read.inc()
            index += 1
            if example is not None:
                yield f"{split}-{index - 1:09d}", example

    def _examples(self, kind, location, settings):
        if kind == "tfds":
            yield from _tfds_examples(location, settings)
            return
        paths = location
        for path in paths:
            if settings["task_type"] == "span":
                yield from _squad_examples(path, settings)
                continue
            for number, row in _rows(path):
                where = f"{path}:{number}"
                if row is None:
                    _skip("undecodable", settings, where)
                    yield None
                elif settings["task_type"] == "token_classification":
                    yield _canonical_token_example(row, settings, where)
                else:
                    yield _canonical_text_example(row, settings, where)


def _tfds_examples(location, settings):
    """Canonical examples of a TFDS split, through the fine-tuning reader's column mapping."""
    from xlnet_tf.data.finetuning import raw_dataset
    from xlnet_tf.finetuning.finetuning_config import TaskSection

    name, split = location
    task = TaskSection(task_type=settings["task_type"], dataset=name, train_split=split,
                       text_fields=settings["tfds_text_fields"], label_field=settings["tfds_label_field"] or "",
                       data_dir=settings["tfds_data_dir"] or "")
    for ex in raw_dataset(task, "train", data_dir=settings["tfds_data_dir"] or None).as_numpy_iterator():
        decode = lambda v: v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v  # noqa: E731
        if settings["task_type"] == "span":
            yield {"context": decode(ex["context"]), "question": decode(ex["question"]),
                   "answer_text": decode(ex["answer_text"]), "answer_start": int(ex["answer_start"]),
                   "is_impossible": bool(ex["is_impossible"])}
        elif settings["task_type"] == "token_classification":
            yield {"tokens": [decode(t) for t in ex["tokens"].tolist()], "tags": [int(t) for t in ex["tags"].tolist()]}
        else:
            example = {"text": decode(ex["text"]),
                       "label": float(ex["label"]) if settings["task_type"] == "regression" else int(ex["label"])}
            if "text_pair" in ex:
                example["text_pair"] = decode(ex["text_pair"])
            yield example


# --------------------------------------------------------------------------- encoding


class EncodeExamples(beam.DoFn):
    """Batches of (example_id, example) -> (split, shard), (record_key, serialized tf.train.Example)."""

    def __init__(self, settings, vocab_proto):
        self._settings = settings
        self._proto = vocab_proto

    def setup(self):
        import tensorflow as tf

        from xlnet_tf.preprocessing.segment_layout import packed_length, truncated_rows
        from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
        from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
        from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

        s = self._settings
        self._tf = tf
        tokenizer = XLNetTokenizer(self._proto, lowercase=s["lowercase"])
        length = s["sequence_length"]
        kind = s["task_type"]
        string_spec = tf.TensorSpec([None], tf.string)
        if kind in ("classification", "regression"):
            # A long-document task packs one window of S*L pieces, stored flattened.
            packer = XLNetPacker(packed_length(length, s.get("max_segments", 1)), truncate=s["truncate"])
            pre = TextPreprocessor(tokenizer, packer)

            def encode(*texts):
                # TextPreprocessor's packing, keeping the pieces to flag what the packer cut.
                batch = tf.shape(texts[0])[0]
                both = pre.tokenize(tf.concat(texts, axis=0))  # [len(texts) * B, None]
                pieces = [both[i * batch:(i + 1) * batch] for i in range(len(texts))]
                features = packer(tuple(pieces))  # [B, S*L]
                return features, truncated_rows(features["padding_mask"], pieces)

            if len(s["text_fields"]) > 1:
                self._encode = tf.function(lambda a, b: encode(a, b), input_signature=[string_spec, string_spec])
            else:
                self._encode = tf.function(lambda a: encode(a), input_signature=[string_spec])
        elif kind == "token_classification":
            from xlnet_tf.data.word_tag_encoder import word_tag_encoder

            encoder = word_tag_encoder(tokenizer, length, truncate=s["truncate"])
            ragged_words = tf.RaggedTensorSpec([None, None], tf.string)
            ragged_tags = tf.RaggedTensorSpec([None, None], tf.int32)
            self._encode = tf.function(lambda w, t: encoder({"tokens": w, "tags": t}),
                                       input_signature=[ragged_words, ragged_tags])
        else:
            from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor

            squad = XLNetSquadPreprocessor(tokenizer, sequence_length=length,
                                           max_query_length=s["max_query_length"], doc_stride=s["doc_stride"])
            scalar = lambda dtype: tf.TensorSpec([], dtype)  # noqa: E731
            self._encode = tf.function(
                lambda c, q, start, text, impossible: squad(c, q, start, text, impossible),
                input_signature=[scalar(tf.string), scalar(tf.string), scalar(tf.int32), scalar(tf.string),
                                 scalar(tf.bool)])
        self._written = Metrics.counter(_NAMESPACE, "written")
        self._records = Metrics.counter(_NAMESPACE, "records")

    def process(self, batch):
        tf = self._tf
        s = self._settings
        kind = s["task_type"]
        ids = [example_id for example_id, _ in batch]
        examples = [example for _, example in batch]
        if kind == "span":
            for example_id, ex in zip(ids, examples):
                w = self._encode(tf.constant(ex["context"]), tf.constant(ex["question"]),
                                 tf.constant(ex["answer_start"], tf.int32), tf.constant(ex["answer_text"]),
                                 tf.constant(ex["is_impossible"]))
                w = {k: v.numpy() for k, v in w.items()}
                for i in range(w["token_ids"].shape[0]):
                    features = {k: w[k][i] for k in FEATURE_KEYS}
                    # The preprocessor's batch keys are plural; a record holds one window's label.
                    start, end, impossible = SPAN_LABEL_KEYS
                    labels = {start: [w["start_positions"][i]], end: [w["end_positions"][i]],
                              impossible: [w["is_impossible"][i]]}
                    yield self._record(example_id, features, labels, window=i)
                self._written.inc()
            return
        if kind == "token_classification":
            words = tf.ragged.constant([ex["tokens"] for ex in examples], dtype=tf.string)
            tags = tf.ragged.constant([ex["tags"] for ex in examples], dtype=tf.int32)
            features, labels = self._encode(words, tags)
            labels = labels.numpy()
        else:
            texts = tf.constant([ex["text"] for ex in examples], tf.string)
            if len(s["text_fields"]) > 1:
                features, truncated = self._encode(
                    texts, tf.constant([ex.get("text_pair", "") for ex in examples], tf.string))
            else:
                features, truncated = self._encode(texts)
            truncated = truncated.numpy()
        features = {k: v.numpy() for k, v in features.items()}
        for row, (example_id, ex) in enumerate(zip(ids, examples)):
            row_features = {k: v[row] for k, v in features.items()}
            if kind == "token_classification":
                label = {LABELS_KEY: labels[row]}
            else:
                label = {LABEL_KEY: [ex["label"]]}
                row_features[TRUNCATED_KEY] = [int(truncated[row])]
            yield self._record(example_id, row_features, label)
            self._written.inc()

    def _record(self, example_id, features, labels, window=None):
        tf = self._tf
        s = self._settings

        def ints(values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

        feature = {k: ints(v) for k, v in features.items()}
        for key, value in labels.items():
            if s["task_type"] == "regression":
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in value]))
            else:
                feature[key] = ints(value)
        feature[EXAMPLE_ID_KEY] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[example_id.encode("utf-8")]))
        if window is not None:
            feature[WINDOW_INDEX_KEY] = ints([window])
        self._records.inc()
        split = example_id.rsplit("-", 1)[0]
        shard = _shard_of(example_id, s["seed"], s["num_shards"])
        key = example_id if window is None else f"{example_id}-{window:05d}"
        return (split, shard), (key, tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


class WriteShard(beam.DoFn):
    """One (split, shard) group -> one TFRecord file, records sorted by key; yields (file, count)."""

    def __init__(self, output_dir, num_shards):
        self._output_dir = output_dir
        self._num_shards = num_shards

    def process(self, element):
        import tensorflow as tf

        (split, shard), records = element
        records = sorted(records)
        path = os.path.join(self._output_dir, shard_file_name(split, shard, self._num_shards))
        temporary = path + ".tmp"
        with tf.io.TFRecordWriter(temporary) as writer:
            for _, record in records:
                writer.write(record)
        tf.io.gfile.rename(temporary, path, overwrite=True)
        yield json.dumps({"split": split, "shard": shard, "num_records": len(records)})


class _WriteCounts(beam.DoFn):
    """All shards' `(file, count)` JSON lines -> one file at `path`, written atomically through gfile."""

    def __init__(self, path):
        self._path = path

    def process(self, lines):
        from xlnet_tf.storage import atomic_files

        atomic_files.write_text(self._path, "".join(line + "\n" for line in sorted(lines)))
        yield self._path


def build_pipeline(pipeline, settings, sources, vocab_proto):
    """Adds the job's transforms to `pipeline` (sources: list of (split, kind, location))."""
    counts_prefix = os.path.join(settings["output_dir"], SHARD_COUNTS_FILE)
    return (
        pipeline
        | "Sources" >> beam.Create(sources)
        | "Read" >> beam.ParDo(ReadSource(settings))
        | "Spread" >> beam.Reshuffle()
        | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=settings["encode_batch_size"])
        | "Encode" >> beam.ParDo(EncodeExamples(settings, vocab_proto))
        | "GroupByShard" >> beam.GroupByKey()
        | "Write" >> beam.ParDo(WriteShard(settings["output_dir"], settings["num_shards"]))
        # Not beam.io.WriteToText: Beam's filesystems do not know every tf.io.gfile scheme (ram://).
        | "CollectCounts" >> beam.combiners.ToList()
        | "Counts" >> beam.ParDo(_WriteCounts(counts_prefix))
    )


# --------------------------------------------------------------------------- driver


def infer_label_names(paths, label_field):
    """Sorted distinct string labels of the first split; None when they are all integers."""
    labels = set()
    for path in paths:
        for _, row in _rows(path):
            if isinstance(row, dict) and row.get(label_field) is not None:
                labels.add(str(row[label_field]))
    if not labels or all(_is_int(label) for label in labels):
        return None
    return sorted(labels)


def present_text_fields(paths):
    """`["text", "text_pair"]` when any row of `paths` has a `text_pair`, else `["text"]`.

    Every row is looked at, not the first: JSONL rows may leave out a key, and
    deciding "single text" from a first row without `text_pair` would silently
    drop every later row's second text. A CSV/TSV `text_pair` column counts even
    where its cells are empty; a JSONL `"text_pair": null` does not.

    Args:
        paths: the JSONL / CSV / TSV files of every input split.

    Returns:
        The text fields of the task.

    Example:
    >>> present_text_fields(["train.jsonl", "dev.jsonl"])  # doctest: +SKIP
    ['text', 'text_pair']
    """
    for path in paths:
        for _, row in _rows(path):
            if isinstance(row, dict) and row.get("text_pair") is not None:
                return ["text", "text_pair"]
    return ["text"]


def _prepare_output_dir(output_dir, overwrite):
    import tensorflow as tf

    existing = tf.io.gfile.glob(os.path.join(output_dir, f"*{SHARD_SUFFIX}")) + tf.io.gfile.glob(
        os.path.join(output_dir, MANIFEST))
    if existing and not overwrite:
        raise PipelineInputError(f"{output_dir!r} already holds records ({len(existing)} files); pass --overwrite.")
    for path in existing:
        tf.io.gfile.remove(path)
    tf.io.gfile.makedirs(output_dir)


def _counter(result, name):
    found = result.metrics().query(MetricsFilter().with_namespace(_NAMESPACE).with_name(name))["counters"]
    return int(sum(c.committed or 0 for c in found))


def prepare_finetuning_data(settings, sources, vocab_proto, vocabulary, *, overwrite=False, beam_args=()):
    """Runs the job on resolved settings, writes and returns the manifest.

    `xlnet-tf prepare-finetuning` (`xlnet_tf.cli.prepare_finetuning`) checks the
    command line and resolves it into these arguments.

    Args:
        settings: a dict with `task_type`, `sequence_length`, `max_segments` (optional,
            default 1; classification / regression only), `text_fields`,
            `label_field`, `label_names`, `truncate`, `lowercase`,
            `max_query_length`, `doc_stride`, `num_shards`, `seed`,
            `encode_batch_size`, `strict`, `output_dir`, `tfds`, `tfds_data_dir`,
            `tfds_text_fields`, `tfds_label_field` and `input`; recorded in the
            manifest (all but `output_dir`).
        sources: `(split, "files", [paths])` or `(split, "tfds", (name, tfds_split))` tuples.
        vocab_proto: the bytes of `spiece.model`.
        vocabulary: the manifest's vocabulary entry (`file`, `sha256`, `vocabulary_size`).
        overwrite: replace records already in `settings["output_dir"]`.
        beam_args: Beam pipeline options (`--runner DataflowRunner ...`); DirectRunner by default.

    Returns:
        The manifest dict (also written to `output_dir/manifest.json`).

    Raises:
        PipelineInputError: the output directory already holds records and `overwrite` is False.

    Example:
    >>> manifest = prepare_finetuning_data(settings, [("train", "files", ["train.jsonl"])],
    ...                                    vocab_proto, vocabulary)  # doctest: +SKIP
    """
    import tensorflow as tf

    output_dir, num_shards = settings["output_dir"], settings["num_shards"]
    _prepare_output_dir(output_dir, overwrite)
    beam_args = list(beam_args)
    if not any(a.startswith("--runner") for a in beam_args):
        beam_args.append("--runner=DirectRunner")
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    build_pipeline(pipeline, settings, sources, vocab_proto)
    result = pipeline.run()
    result.wait_until_finish()

    counts_path = os.path.join(output_dir, SHARD_COUNTS_FILE)
    counts = {}
    with tf.io.gfile.GFile(counts_path) as f:
        for line in f:
            if line.strip():
                entry = json.loads(line)
                counts[(entry["split"], entry["shard"])] = entry["num_records"]
    tf.io.gfile.remove(counts_path)
    splits = {}
    for split, _, _ in sources:
        files = []
        for shard in range(num_shards):
            name = shard_file_name(split, shard, num_shards)
            if (split, shard) not in counts:  # every shard file exists, possibly empty
                with tf.io.TFRecordWriter(os.path.join(output_dir, name)):
                    pass
            files.append({"file": name, "num_records": counts.get((split, shard), 0)})
        splits[split] = {"files": files, "num_records": sum(f["num_records"] for f in files)}
    manifest = {
        "format": FORMAT,
        "sequence_length": settings["sequence_length"],
        "max_segments": int(settings.get("max_segments", 1)),
        "task": {"task_type": settings["task_type"],
                 "num_classes": len(settings["label_names"]) if settings["label_names"] else None,
                 "label_names": settings["label_names"],
                 "has_text_pair": settings["task_type"] == "span" or len(settings["text_fields"]) > 1},
        "splits": splits,
        "examples": {"read": _counter(result, "read"), "written": _counter(result, "written"),
                     "skipped": {reason: _counter(result, f"skipped_{reason}") for reason in SKIP_REASONS}},
        "num_records": sum(s["num_records"] for s in splits.values()),
        "vocabulary": vocabulary,
        "settings": {**{k: v for k, v in settings.items() if k != "output_dir"}, "beam_args": beam_args},
    }
    from xlnet_tf.storage import atomic_files

    # Atomic: a reader sees the whole manifest or none, on any gfile filesystem.
    atomic_files.write_json(os.path.join(output_dir, MANIFEST), manifest)
    return manifest

