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
(`xlnet_tf.preprocessing.task_encoding`; `XLNetSquadPreprocessor` for spans), so records equal what
`xlnet_tf.data.finetuning.finetuning_dataset` feeds the model.

Inputs (columns renamed with `--text-fields` / `--label-field`):
- classification / regression: JSONL or CSV/TSV with `text`, optional `text_pair`, `label`;
  string labels map through `--label-names` (default: the sorted distinct labels of the first split);
- token_classification: JSONL with `tokens` (list of words) and `tags` (ids or names);
- multiple_choice: JSONL with `context`, `question` (optional), `options` (the same number in every row),
  `label` (index); records hold the C choices flattened (`[C*S*L]`), the manifest's `num_classes` is C;
- span: SQuAD-format JSON (one record per window; document stride for long passages);
- TFDS by name (`--tfds glue/mrpc`), using the column layout of `xlnet_tf.data.finetuning_tasks`.

Reading: a JSONL file larger than `--read-range-bytes` is read as byte ranges on several workers (each
range owns the lines that start in it, `xlnet_tf.storage.line_ranges`); a first pass counts each
range's examples so ids keep their position in the file. CSV/TSV (a quoted field may hold a newline,
so no byte offset is a safe cut) and SQuAD JSON (one JSON document) are read whole; the manifest's
`inputs` says how every file was read.

Local lines are read by the fine-tuning reader's own reader (`xlnet_tf.tasks.example_rows`) with its
skip-and-count option: skipped examples are counted by reason (Beam counters and the manifest), never
silently dropped: `undecodable` (a line that is not UTF-8 / not JSON), `missing_field`, `empty` (a SQuAD
question without a passage), `bad_label` (not a known class, not a number, mismatched tags or options).
An empty text is an example like any other (packed `<sep> <cls>`, as every other path packs it).
`--strict` turns any skip into an error naming the file and line. The manifest's
counts are computed from the data (summed side outputs), not from Beam's metrics, so they hold on
runners without committed metrics; the job fails if read != written + skipped.

Determinism: an example's id is `{split}-{index:09d}` (index = position in its input, files in the
order given); its shard is SHA-256(seed, id) mod `num_shards`, and each shard is written by one
DoFn call, sorted by id. Same inputs and settings give byte-identical files on any runner.
"""

import collections
import hashlib
import json
import os
import types

import apache_beam as beam
from apache_beam.metrics import Metrics
import tensorflow as tf

from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks.example_rows import SKIP_REASONS, Skipped
from xlnet_tf.formats.finetuning_records import EXAMPLE_ID_KEY
from xlnet_tf.formats.finetuning_records import FEATURE_KEYS
from xlnet_tf.formats.finetuning_records import FORMAT
from xlnet_tf.formats.finetuning_records import INPUT_ENTRY_KEYS
from xlnet_tf.formats.finetuning_records import LABEL_KEY
from xlnet_tf.formats.finetuning_records import LABELS_KEY
from xlnet_tf.formats.finetuning_records import MANIFEST_FILE as MANIFEST
from xlnet_tf.formats.finetuning_records import SHARD_COUNTS_FILE
from xlnet_tf.formats.finetuning_records import SHARD_SUFFIX
from xlnet_tf.formats.finetuning_records import SPAN_LABEL_KEYS
from xlnet_tf.formats.finetuning_records import TRUNCATED_KEY
from xlnet_tf.formats.finetuning_records import WINDOW_INDEX_KEY
from xlnet_tf.formats.finetuning_records import shard_file_name
from xlnet_tf.storage import line_ranges
from xlnet_tf.beam.job_files import expand_input_files
from xlnet_tf.beam.job_files import prepare_output_dir
from xlnet_tf.beam.job_files import reading
from xlnet_tf.beam.pipeline_input_error import PipelineInputError
from xlnet_tf.beam.runner_options import beam_options
from xlnet_tf.beam.runner_options import check_paths_for_runner
from xlnet_tf.beam.runner_options import check_runner_available
from xlnet_tf.beam.runner_options import run_pipeline
from xlnet_tf.beam.tfds_sub_splits import tfds_sub_splits
from xlnet_tf.storage import atomic_files
from xlnet_tf.data.finetuning import raw_dataset
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.preprocessing.segment_layout import packed_length, truncated_rows
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
from xlnet_tf.tasks import task_type
from xlnet_tf.preprocessing import task_encoding

_NAMESPACE = "xlnet_finetuning"


def _shard_of(example_id, seed, num_shards):
    digest = hashlib.sha256(f"{seed}:{example_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % num_shards


# --------------------------------------------------------------------------- reading


def _skip(skipped, job, where):
    """`skipped`, counted; with `--strict` an error naming `where` instead (one line on the command line)."""
    if job.strict:
        raise PipelineInputError(f"{where}: {skipped.reason.replace('_', ' ')}: {skipped.message} (drop --strict "
                                 "to skip and count such examples).")
    Metrics.counter(_NAMESPACE, f"skipped_{skipped.reason}").inc()
    return skipped


def _squad_questions(path):
    """`(context, qa)` of every question of a SQuAD-format JSON file."""
    with reading(path), tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        data = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PipelineInputError(f"Input file {path!r} is not a SQuAD-format JSON file ({e}).") from None
    if not isinstance(data, dict):
        raise PipelineInputError(f"Input file {path!r} is not a SQuAD-format JSON file (it holds a "
                                 f"{type(data).__name__}, not an object with a 'data' list).")
    for article in data.get("data", []):
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                yield paragraph.get("context"), qa


def _squad_examples(path, job):
    for context, qa in _squad_questions(path):
        where = f"{path}: question {qa.get('id')!r}"
        if not context or not qa.get("question"):
            reason = "empty" if context == "" else "missing_field"
            yield _skip(Skipped(reason, "no context or no question."), job, where)
            continue
        answers = qa.get("answers") or []
        impossible = bool(qa.get("is_impossible", False)) or not answers
        first = answers[0] if answers else {"text": "", "answer_start": 0}
        yield {"context": context, "question": qa["question"], "answer_text": "" if impossible else first["text"],
               "answer_start": 0 if impossible else int(first["answer_start"]), "is_impossible": impossible}


# A unit of reading: `(split, order, "file", (path, start, end))` or `(split, order, "tfds", (name, tfds_split))`;
# `order` is its place among its split's units, whose examples are numbered in that order.
def read_units(sources, task, job):
    """The job's units of reading and the manifest's `inputs` entries (how each file is read).

    A JSONL file larger than `job.read_range_bytes` becomes several byte ranges;
    CSV/TSV (quoted fields may hold newlines), SQuAD JSON (one JSON document)
    and compressed files are one unit each. A TFDS split becomes
    `job.tfds_read_shards` even sub-splits.

    Args:
        sources: `(split, "files", [paths])` or `(split, "tfds", (name, tfds_split))` tuples.
        task: the job's `TaskSpec`.
        job: the job's `FinetuningJobSettings`.
    """
    units, inputs = [], []
    for split, kind, location in sources:
        if kind == "tfds":
            name, tfds_split = location
            sub_splits = tfds_sub_splits(tfds_split, job.tfds_read_shards)
            units.extend((split, order, "tfds", (name, sub)) for order, sub in enumerate(sub_splits))
            continue
        for path in location:
            whole = None
            if not task_type(task.task_type).reads_rows:
                whole = "SQuAD JSON is one JSON document"
            elif example_rows.is_csv(path):
                whole = "CSV/TSV fields may hold quoted newlines: no byte offset is a safe cut"
            ranges, entry = line_ranges.reading_plan(path, job.read_range_bytes, whole)
            order = sum(1 for unit in units if unit[0] == split)
            units.extend((split, order + i, "file", (path, start, end)) for i, (start, end) in enumerate(ranges))
            inputs.append({INPUT_ENTRY_KEYS[0]: split, **entry})
    return units, inputs


def _count_unit(unit, task, job):
    """`(examples, lines)` a unit holds: what the units after it must number their examples from."""
    split, order, kind, location = unit
    if kind == "tfds":
        # Counted through the same reader that numbers them (it drops e.g. GLUE's unlabeled rows).
        return (split, order), (sum(1 for _ in _tfds_examples(location, task, job)), 0)
    path, start, end = location
    with reading(path):
        if example_rows.is_csv(path):
            examples, lines = sum(1 for _ in example_rows.rows(path)), 0
        elif path.lower().endswith(".json"):
            examples, lines = sum(1 for _ in _squad_questions(path)), 0
        else:
            examples = lines = 0
            for _, line in line_ranges.lines_in_range(path, start, end):
                lines += 1
                examples += bool(line.strip())
    return (split, order), (examples, lines)


class ReadSource(beam.DoFn):
    """A unit of reading -> (example_id, canonical example); its counts go to the "stats" output.

    Example ids number the examples of a split in input order: a unit starts
    from the example count of its split's earlier units (`unit_sizes`, a side
    input; empty when every split is one unit).
    """

    def __init__(self, task, job, units):
        self._task = task
        self._job = job
        self._units = units

    def process(self, unit, unit_sizes):
        split, order, kind, location = unit
        earlier = [u for u in self._units if u[0] == split and u[1] < order]
        index = sum(unit_sizes[(split, u[1])][0] for u in earlier)
        # Line numbers (for messages) count from the start of the same file.
        first_line = 1 + sum(unit_sizes[(split, u[1])][1] for u in earlier if u[3][0] == location[0])
        counts = collections.Counter()
        read = Metrics.counter(_NAMESPACE, "read")
        for example in self._examples(kind, location, first_line):
            read.inc()
            counts["read"] += 1
            index += 1
            if isinstance(example, Skipped):
                counts[f"skipped_{example.reason}"] += 1
            else:
                yield f"{split}-{index - 1:09d}", example
        for key, value in counts.items():
            yield beam.pvalue.TaggedOutput("stats", (key, value))

    def _examples(self, kind, location, first_line):
        task, job = self._task, self._job
        if kind == "tfds":
            yield from _tfds_examples(location, task, job)
            return
        path, start, end = location
        entry = task_type(task.task_type)
        if not entry.reads_rows:
            yield from _squad_examples(path, job)
            return
        settings = entry.row_settings(task, entry.num_choices(task))
        # A file that fails now (cut short, removed, unreadable here) stops the job with one line naming it.
        with reading(path):
            for number, example in example_rows.read_examples(path, entry, settings, skip_bad=True, start=start,
                                                              end=end, first_line=first_line):
                yield _skip(example, job, f"{path}:{number}") if isinstance(example, Skipped) else example


def _tfds_examples(location, task, job):
    """Canonical examples of a TFDS split, through the fine-tuning reader's column mapping."""
    name, split = location
    entry = task_type(task.task_type)
    tfds_task = TaskSpec(task_type=entry.name, dataset=name, train_split=split, text_fields=job.tfds_text_fields,
                         label_field=job.tfds_label_field or "", data_dir=job.tfds_data_dir or "")

    def decode(value):
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if hasattr(value, "tolist") and getattr(value, "ndim", 0):
            return [decode(v) for v in value.tolist()]
        return value.item() if hasattr(value, "item") else value

    for ex in raw_dataset(tfds_task, "train", data_dir=job.tfds_data_dir or None).as_numpy_iterator():
        example = {field: decode(ex[field]) for field in entry.example_fields if field in ex and field != "id"}
        if "label" in example:
            example["label"] = float(example["label"]) if entry.score_labels else int(example["label"])
        yield example


# --------------------------------------------------------------------------- encoding


def _packer(task, entry):
    # A long-document task packs one window of S*L pieces, stored flattened.
    return XLNetPacker(packed_length(task.sequence_length, task.max_segments),
                       truncate=entry.truncate or task.truncate,
                       second_max_length=task.max_qa_length if entry.truncate else None)


def _strings(examples, field, default=None):
    return tf.constant([ex[field] if default is None else ex.get(field, default) for ex in examples], tf.string)


def _text_records(task, entry, tokenizer):
    """`encode(ids, examples)` -> per example `(id, [(features, labels, window)])`: a text or a pair."""
    packer = _packer(task, entry)
    strings = tf.TensorSpec([None], tf.string)

    def encode_texts(*texts):
        features, pieces = task_encoding.encode_text(tokenizer, packer, texts)  # [B, S*L]
        return features, truncated_rows(features["padding_mask"], pieces)

    pairs = len(task.text_fields) > 1
    if pairs:
        encode_batch = tf.function(lambda a, b: encode_texts(a, b), input_signature=[strings, strings])
    else:
        encode_batch = tf.function(lambda a: encode_texts(a), input_signature=[strings])

    def encode(ids, examples):
        texts = [_strings(examples, "text")] + ([_strings(examples, "text_pair", "")] if pairs else [])
        features, truncated = encode_batch(*texts)
        return _class_rows(ids, examples, features, truncated.numpy())
    return encode


def _choice_records(task, entry, tokenizer):
    """`encode(ids, examples)` -> per example `(id, [(features, labels, window)])`: C options in one record."""
    packer = _packer(task, entry)
    strings = tf.TensorSpec([None], tf.string)

    def encode_choices(context, question, options):
        features, pieces = task_encoding.encode_choices(tokenizer, packer, context, question,
                                                        options)  # [B*C, S*L]
        batch, num_choices = tf.shape(options)[0], tf.shape(options)[1]
        truncated = tf.reshape(truncated_rows(features["padding_mask"], pieces), [batch, num_choices])
        features = {k: tf.reshape(v, [batch, -1]) for k, v in features.items()}  # [B, C*S*L]
        return features, tf.reduce_any(truncated, axis=1)  # [B]

    encode_batch = tf.function(encode_choices, input_signature=[
        strings, strings, tf.TensorSpec([None, None], tf.string)])

    def encode(ids, examples):
        features, truncated = encode_batch(_strings(examples, "context"), _strings(examples, "question"),
                                           _strings(examples, "options"))
        return _class_rows(ids, examples, features, truncated.numpy())
    return encode


def _class_rows(ids, examples, features, truncated):
    """One record per example: its packed rows, its label and whether packing cut it."""
    features = {k: v.numpy() for k, v in features.items()}
    for row, (example_id, ex) in enumerate(zip(ids, examples)):
        row_features = {k: v[row] for k, v in features.items()}
        row_features[TRUNCATED_KEY] = [int(truncated[row])]
        yield example_id, [(row_features, {LABEL_KEY: [ex["label"]]}, None)]


def _word_records(task, entry, tokenizer):
    """`encode(ids, examples)` -> per example `(id, [(features, labels, window)])`: one tag per position."""
    packer = XLNetPacker(task.sequence_length, truncate=task.truncate)
    label_packer = task_encoding.word_label_packer(packer)
    encode_batch = tf.function(
        lambda w, t: task_encoding.encode_words(tokenizer, packer, w, t, label_packer)[:2],
        input_signature=[tf.RaggedTensorSpec([None, None], tf.string, row_splits_dtype=tf.int64),
                         tf.RaggedTensorSpec([None, None], tf.int32, row_splits_dtype=tf.int64)])

    def encode(ids, examples):
        words = tf.ragged.constant([ex["tokens"] for ex in examples], dtype=tf.string, ragged_rank=1,
                                   row_splits_dtype=tf.int64)
        tags = tf.ragged.constant([ex["tags"] for ex in examples], dtype=tf.int32, ragged_rank=1,
                                  row_splits_dtype=tf.int64)
        features, labels = encode_batch(words, tags)
        features, labels = {k: v.numpy() for k, v in features.items()}, labels.numpy()
        for row, example_id in enumerate(ids):
            yield example_id, [({k: v[row] for k, v in features.items()}, {LABELS_KEY: labels[row]}, None)]
    return encode


def _window_records(task, entry, tokenizer):
    """`encode(ids, examples)` -> per example `(id, [(features, labels, window)])`: one record per window."""
    squad = XLNetSquadPreprocessor(tokenizer, sequence_length=task.sequence_length,
                                   max_query_length=task.max_query_length, doc_stride=task.doc_stride)
    scalar = lambda dtype: tf.TensorSpec([], dtype)  # noqa: E731
    encode_example = tf.function(
        lambda c, q, start, text, impossible: squad(c, q, start, text, impossible),
        input_signature=[scalar(tf.string), scalar(tf.string), scalar(tf.int32), scalar(tf.string),
                         scalar(tf.bool)])
    # The preprocessor's batch keys are plural; a record holds one window's label.
    start, end, impossible = SPAN_LABEL_KEYS

    def encode(ids, examples):
        for example_id, ex in zip(ids, examples):
            w = encode_example(tf.constant(ex["context"]), tf.constant(ex["question"]),
                               tf.constant(ex["answer_start"], tf.int32), tf.constant(ex["answer_text"]),
                               tf.constant(ex["is_impossible"]))
            w = {k: v.numpy() for k, v in w.items()}
            yield example_id, [({k: w[k][i] for k in FEATURE_KEYS},
                                {start: [w["start_positions"][i]], end: [w["end_positions"][i]],
                                 impossible: [w["is_impossible"][i]]}, i)
                               for i in range(w["token_ids"].shape[0])]
    return encode


# The Beam job's packing of a batch of examples into records, by kind of example (`TaskType.example_kind`).
_RECORD_ENCODERS = types.SimpleNamespace(text=_text_records, choices=_choice_records, words=_word_records,
                                         windows=_window_records)


class EncodeExamples(beam.DoFn):
    """Batches of (example_id, example) -> (split, shard), (record_key, serialized tf.train.Example).

    Packing is the fine-tuning reader's (`xlnet_tf.preprocessing.task_encoding`), so records equal what
    `xlnet_tf.data.finetuning.finetuning_dataset` feeds the model.
    """

    def __init__(self, task, job, vocab_proto):
        self._task = task
        self._job = job
        self._proto = vocab_proto

    def setup(self):
        task = self._task
        self._tf = tf
        self._entry = entry = task_type(task.task_type)
        tokenizer = XLNetTokenizer(self._proto, lowercase=task.lowercase)
        self._encode = entry.example_kind(_RECORD_ENCODERS)(task, entry, tokenizer)
        self._written = Metrics.counter(_NAMESPACE, "written")
        self._records = Metrics.counter(_NAMESPACE, "records")

    def process(self, batch):
        ids = [example_id for example_id, _ in batch]
        examples = [example for _, example in batch]
        for example_id, rows in self._encode(ids, examples):
            for features, labels, window in rows:
                yield self._record(example_id, features, labels, window=window)
            self._written.inc()
        yield beam.pvalue.TaggedOutput("stats", ("written", len(batch)))

    def _record(self, example_id, features, labels, window=None):
        tf = self._tf

        def ints(values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

        feature = {k: ints(v) for k, v in features.items()}
        for key, value in labels.items():
            if self._entry.score_labels:
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in value]))
            else:
                feature[key] = ints(value)
        feature[EXAMPLE_ID_KEY] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[example_id.encode("utf-8")]))
        if window is not None:
            feature[WINDOW_INDEX_KEY] = ints([window])
        self._records.inc()
        split = example_id.rsplit("-", 1)[0]
        shard = _shard_of(example_id, self._job.seed, self._job.num_shards)
        key = example_id if window is None else f"{example_id}-{window:05d}"
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        # Deterministic: a protobuf map's entries are otherwise serialized in an order that can differ
        # between processes, and the same example would give other bytes on another worker.
        return (split, shard), (key, example.SerializeToString(deterministic=True))


class WriteShard(beam.DoFn):
    """One (split, shard) group -> one TFRecord file, records sorted by key; yields (file, count)."""

    def __init__(self, output_dir, num_shards):
        self._output_dir = output_dir
        self._num_shards = num_shards

    def process(self, element):
        (split, shard), records = element
        records = sorted(records)
        path = os.path.join(self._output_dir, shard_file_name(split, shard, self._num_shards))
        atomic_files.write_records(path, (record for _, record in records))
        yield json.dumps({"split": split, "shard": shard, "num_records": len(records)})


class _WriteCounts(beam.DoFn):
    """Shard counts + summed example counts -> one JSON-lines file at `path`, written atomically through gfile.

    Fails the job when the examples do not add up (read != written + skipped):
    the manifest never records counts that contradict each other.
    """

    def __init__(self, path):
        self._path = path

    def process(self, lines, stats):
        stats = dict(stats)
        examples = {"read": int(stats.get("read", 0)), "written": int(stats.get("written", 0)),
                    "skipped": {reason: int(stats.get(f"skipped_{reason}", 0)) for reason in SKIP_REASONS}}
        if examples["read"] != examples["written"] + sum(examples["skipped"].values()):
            raise RuntimeError(
                f"Example accounting does not add up: read {examples['read']}, written {examples['written']}, "
                f"skipped {examples['skipped']}."
            )
        body = "".join(line + "\n" for line in sorted(lines)) + json.dumps({"examples": examples}) + "\n"
        atomic_files.write_text(self._path, body)
        yield self._path


def build_pipeline(pipeline, task, job, sources, vocab_proto):
    """Adds the job's transforms to `pipeline` (sources: list of (split, kind, location))."""
    counts_prefix = os.path.join(job.output_dir, SHARD_COUNTS_FILE)
    units, _ = read_units(sources, task, job)
    # Only splits read as several units need the first pass that numbers their examples.
    multi = {split for split, order, _, _ in units if order > 0}
    unit_sizes = (
        pipeline
        | "UnitsToCount" >> beam.Create([u for u in units if u[0] in multi])
        | "SpreadCounting" >> beam.Reshuffle()
        | "CountUnits" >> beam.Map(_count_unit, task, job)
    )
    read = (
        pipeline
        | "Sources" >> beam.Create(units)
        # One element per unit: without a shuffle a runner may read every range in one bundle.
        | "SpreadSources" >> beam.Reshuffle()
        | "Read" >> beam.ParDo(ReadSource(task, job, units), unit_sizes=beam.pvalue.AsDict(unit_sizes)).with_outputs(
            "stats", main="examples")
    )
    encoded = (
        read.examples
        | "Spread" >> beam.Reshuffle()
        | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=job.encode_batch_size)
        | "Encode" >> beam.ParDo(EncodeExamples(task, job, vocab_proto)).with_outputs("stats", main="records")
    )
    stats = (
        (read.stats, encoded.stats)
        | "MergeStats" >> beam.Flatten()
        | "SumStats" >> beam.CombinePerKey(sum)
    )
    return (
        encoded.records
        | "GroupByShard" >> beam.GroupByKey()
        | "Write" >> beam.ParDo(WriteShard(job.output_dir, job.num_shards))
        # Not beam.io.WriteToText: Beam's filesystems do not know every tf.io.gfile scheme (ram://).
        | "CollectCounts" >> beam.combiners.ToList()
        | "Counts" >> beam.ParDo(_WriteCounts(counts_prefix), stats=beam.pvalue.AsList(stats))
    )


# --------------------------------------------------------------------------- driver


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
    >>> from xlnet_tf.beam.finetuning_data import present_text_fields
    >>> present_text_fields(["train.jsonl", "dev.jsonl"])  # doctest: +SKIP
    ['text', 'text_pair']
    """
    for path in paths:
        with reading(path):
            for _, row in example_rows.rows(path):
                if isinstance(row, dict) and row.get("text_pair") is not None:
                    return ["text", "text_pair"]
    return ["text"]


def prepare_finetuning_data(task, job, sources, vocab_proto, vocabulary, *, overwrite=False, beam_args=()):
    """Runs the job on a resolved task and job settings, writes and returns the manifest.

    `xlnet-tf prepare-finetuning` (`xlnet_tf.cli.prepare_finetuning`) checks the
    command line and resolves it into these arguments.

    Args:
        task: the `xlnet_tf.tasks.task_spec.TaskSpec` of the records: `task_type`, `sequence_length`,
            `max_segments` (a long-document task type), `text_fields`, `label_field`,
            `label_names`, `truncate`, `lowercase`, `max_query_length`, `doc_stride`,
            `max_qa_length`, and for multiple choice `num_classes`, the options per question.
        job: the `FinetuningJobSettings` (shards, seed, strictness, output directory, TFDS
            and reading settings); the manifest records both (all but `output_dir`).
        sources: `(split, "files", [paths])` or `(split, "tfds", (name, tfds_split))` tuples.
        vocab_proto: the bytes of `spiece.model`.
        vocabulary: the manifest's vocabulary entry (`file`, `sha256`, `vocabulary_size`).
        overwrite: replace records already in `job.output_dir`.
        beam_args: Beam pipeline options (`--runner DataflowRunner ...`); DirectRunner by default.

    Returns:
        The manifest dict (also written to `output_dir/manifest.json`).

    Raises:
        PipelineInputError: an input file is missing, unreadable or given
            twice in a split (`job_files.expand_input_files`), the output
            directory already holds records and `overwrite` is False, a path
            is local and the runner's workers are other machines (unless
            `job.shared_filesystem`), the runner cannot start here, or
            a worker found bad input (a file that cannot be read; a bad line
            with `strict`).

    Example:
    >>> from xlnet_tf.beam.finetuning_data import prepare_finetuning_data
    >>> manifest = prepare_finetuning_data(task, FinetuningJobSettings(output_dir="data/mine"),
    ...                                    [("train", "files", ["train.jsonl"])], vocab_proto,
    ...                                    vocabulary)  # doctest: +SKIP
    """
    beam_args = list(beam_args)
    options = beam_options(beam_args)
    _check_before_submitting(job, sources, options, overwrite)
    _, inputs = read_units(sources, task, job)
    run_pipeline(options, lambda pipeline: build_pipeline(pipeline, task, job, sources, vocab_proto))
    counts, examples = _read_shard_counts(job.output_dir)
    splits = _splits(sources, counts, job)
    manifest = {
        "format": FORMAT,
        "sequence_length": task.sequence_length,
        "max_segments": int(task.max_segments),
        "task": _manifest_task(task),
        "splits": splits,
        "examples": examples,
        "inputs": inputs,
        "num_records": sum(s["num_records"] for s in splits.values()),
        "vocabulary": vocabulary,
        "settings": _manifest_settings(task, job, beam_args),
    }
    # Atomic: a reader sees the whole manifest or none, on any gfile filesystem.
    atomic_files.write_json(os.path.join(job.output_dir, MANIFEST), manifest)
    return manifest


def _check_before_submitting(job, sources, options, overwrite):
    """Refuses a job that cannot work before anything is created, then prepares the output directory."""
    check_runner_available(options)
    # The command has expanded and checked them already; a direct call gets the same checks.
    for _, kind, location in sources:
        if kind == "files":
            expand_input_files(location)
    paths = [("--input", path) for _, kind, location in sources if kind == "files" for path in location]
    if any(kind == "tfds" for _, kind, _ in sources):
        import tensorflow_datasets as tfds  # import time: it takes seconds; only `--tfds` sources need it

        paths.append(("--tfds-data-dir", job.tfds_data_dir or tfds.core.constants.DATA_DIR))
    check_paths_for_runner(options, paths + [("--output-dir", job.output_dir)],
                           shared_filesystem=job.shared_filesystem)
    prepare_output_dir(job.output_dir, [f"*{SHARD_SUFFIX}", MANIFEST], overwrite=overwrite,
                       kind="fine-tuning record")


def _read_shard_counts(output_dir):
    """`({(split, shard): records}, example counts)` of the job's counts file, which is then removed."""
    counts_path = os.path.join(output_dir, SHARD_COUNTS_FILE)
    counts, examples = {}, None
    with tf.io.gfile.GFile(counts_path) as f:
        for line in f:
            if line.strip():
                entry = json.loads(line)
                if "examples" in entry:
                    examples = entry["examples"]
                else:
                    counts[(entry["split"], entry["shard"])] = entry["num_records"]
    tf.io.gfile.remove(counts_path)
    return counts, examples


def _splits(sources, counts, job):
    """The manifest's `splits`; a shard no record went to is written as an empty file."""
    splits = {}
    for split, _, _ in sources:
        files = []
        for shard in range(job.num_shards):
            name = shard_file_name(split, shard, job.num_shards)
            if (split, shard) not in counts:  # every shard file exists, possibly empty
                atomic_files.write_records(os.path.join(job.output_dir, name), [])
            files.append({"file": name, "num_records": counts.get((split, shard), 0)})
        splits[split] = {"files": files, "num_records": sum(f["num_records"] for f in files)}
    return splits


def _manifest_task(task):
    entry = task_type(task.task_type)
    return {"task_type": entry.name, "num_classes": entry.records_num_classes(task), "label_names": task.label_names,
            "has_text_pair": entry.records_have_pairs(task)}


def _manifest_settings(task, job, beam_args):
    """The manifest's `settings`: the task's and the job's, as the command line gave them."""
    return {"task_type": task.task_type, "sequence_length": task.sequence_length, "max_segments": task.max_segments,
            "text_fields": task.text_fields, "label_field": task.label_field,
            "num_choices": task_type(task.task_type).num_choices(task), "second_max_length": task.max_qa_length,
            "label_names": task.label_names, "truncate": task.truncate, "lowercase": task.lowercase,
            "max_query_length": task.max_query_length, "doc_stride": task.doc_stride,
            **job.recorded(), "beam_args": beam_args}
