"""Fine-tuning input pipelines: TFDS datasets by name or local files -> batched feature dicts.

Two stages:

1. `raw_dataset(task, role)` reads examples into the canonical fields of the
   task type (see `xlnet_tf.data.finetuning_tasks`), from TFDS (`task.dataset`)
   or from a local file (`task.train_file` / `task.eval_file`):
   - JSONL (`.jsonl`, one JSON object per line) or CSV/TSV with a header row:
     classification/regression columns `text`, optional `text_pair`, `label`
     (names changeable with `task.text_fields` / `task.label_field`); string
     labels are mapped through `task.label_names` (or, when not given, the
     sorted distinct labels of the training file);
     multiple choice: `context`, `question`, `options` (list), `label` (index);
     token classification: `tokens` (list of words), `tags` (list of ids or names);
   - SQuAD-format JSON (`{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}`)
     for span tasks.
   Or `task.records_dir`: the TFRecords of `xlnet-tf prepare-finetuning`
   (already packed; `xlnet_tf.data.finetuning_record_dataset`).
2. `finetuning_dataset(task, tokenizer, role, batch_size, ...)` tokenizes and
   packs inside the graph (`XLNetTokenizer` + `XLNetPacker` /
   `XLNetSquadPreprocessor`) and returns `(features, labels)` batches with a
   static sequence length (and a static batch size for training, which drops the
   remainder and repeats forever).

Features are `token_ids`, `segment_ids`, `padding_mask` int32 `[B, L]`
(`[B, C, L]` for multiple choice); with `task.max_segments` S > 1 (long documents) each example is
packed as one window of S*L pieces and cut into S segments, `[B, S, L]` (`[B, C, S, L]`; the layout
of `xlnet_tf.preprocessing.segment_layout`); span training adds `answer_mask` and
`start_positions` (the end head is conditioned on the gold start). Labels:
int32 `[B]` (classification, multiple choice), float32 `[B]` (regression),
int32 `[B, L]` with -100 on unlabelled positions (token classification), or a
dict `{"start_logits", "end_logits", "cls_logits"}` (span) keyed like the
model's training outputs.
"""

import types

import numpy as np
import tensorflow as tf

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.tasks import example_rows
from xlnet_tf.data.finetuning_tasks import dataset_spec
from xlnet_tf.tasks import task_type
from xlnet_tf.formats.finetuning_records import TRUNCATED_KEY
from xlnet_tf.preprocessing.segment_layout import packed_length, to_segments, truncated_rows
from xlnet_tf.preprocessing.task_encoding import encode_choices, encode_text, encode_words, word_label_packer
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
from xlnet_tf.storage import atomic_files
from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset, read_finetuning_manifest
from xlnet_tf.data.finetuning_record_dataset import records_max_segments

_SHUFFLE_BUFFER = 10000


# --------------------------------------------------------------------------- local files
def infer_label_names(path, label_field="label"):
    """Sorted distinct string labels of a file; None when all labels are integers."""
    return example_rows.infer_label_names([path], label_field)


def _row_settings(task, path):
    entry = task_type(task.task_type)
    return entry.row_settings(task, entry.options_in_file(path))  # every row has the first row's options


def read_local_examples(path, task):
    """Reads a local file into a dict of numpy/list columns in the canonical fields of `task.task_type`.

    Lines go through the one reader of local files (`xlnet_tf.tasks.example_rows`):
    a bad line is a `ValueError` naming the file and the line.
    """
    entry = task_type(task.task_type)
    return entry.example_kind(_LOCAL_COLUMNS)(path, task, entry)


def _row_columns(path, task, entry):
    """`({field: [value per example]}, examples)` of a local JSONL/CSV/TSV file."""
    examples = [example for _, example in example_rows.read_examples(path, entry, _row_settings(task, path))]
    if not examples:
        raise ValueError(example_rows.empty_file_message(path))
    columns = {field: [example[field] for example in examples]
               for field in entry.example_fields if field in examples[0]}
    return columns, examples


def _labelled_columns(path, task, entry):
    columns, examples = _row_columns(path, task, entry)
    columns["label"] = np.asarray(columns["label"], np.float32 if entry.score_labels else np.int32)
    return columns, examples


def _text_columns(path, task, entry):
    columns, examples = _labelled_columns(path, task, entry)
    if not any(example["has_pair"] for example in examples):
        columns.pop("text_pair")
    return columns


def _choice_columns(path, task, entry):
    return _labelled_columns(path, task, entry)[0]


def _word_columns(path, task, entry):
    columns, _ = _row_columns(path, task, entry)
    return {"tokens": tf.ragged.constant(columns["tokens"], dtype=tf.string),
            "tags": tf.ragged.constant(columns["tags"], dtype=tf.int32)}


def _squad_columns(path, task, entry):
    return _read_squad_json(path)


# A local file's examples as columns, by kind of example (`TaskType.example_kind`).
_LOCAL_COLUMNS = types.SimpleNamespace(text=_text_columns, choices=_choice_columns, words=_word_columns,
                                       windows=_squad_columns)


def check_local_files(task):
    """Reads `task.train_file` and `task.eval_file` in full before a run starts.

    Each must exist, parse, hold at least one example and give every example
    the fields and a valid label of `task` (the checks of `read_local_examples`),
    so a bad evaluation file fails before training rather than after the first
    epoch. Also refuses a task with no training data at all.

    Args:
        task: a resolved `TaskSpec` (label names already inferred).

    Raises:
        ValueError: naming the key (`task.train_file` / `task.eval_file`), the
            file and, where it applies, the line.

    Example:
    >>> from xlnet_tf.data.finetuning import check_local_files
    >>> check_local_files(task)  # doctest: +SKIP
    """
    if not (task.train_file or task.dataset or task.records_dir):
        raise ValueError("No training data: task.eval_file alone is not enough; set task.train_file, "
                         "task.dataset or task.records_dir.")
    for role in ("train", "eval"):
        path = getattr(task, f"{role}_file")
        if not path:
            continue
        try:
            read_local_examples(path, task)
        except (ValueError, FileNotFoundError, tf.errors.OpError) as e:
            raise ValueError(f"task.{role}_file: {e}") from e


def _read_squad_json(path):
    try:
        data = atomic_files.read_json(path, kind="SQuAD")
    except ValueError as e:
        raise ValueError(f"{e}; expected SQuAD format.") from e
    if not isinstance(data, dict) or "data" not in data:
        raise ValueError(f"{path}: expected SQuAD format, a JSON object with a 'data' list.")
    columns = {k: [] for k in ("id", "context", "question", "answer_text", "answer_start",
                               "is_impossible", "all_answers")}
    for article in data["data"]:
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                if "id" not in qa or "question" not in qa:
                    raise ValueError(f"{path}: a question has no 'id' or 'question': {qa!r:.200}")
                answers = qa.get("answers", [])
                impossible = bool(qa.get("is_impossible", False)) or not answers
                first = answers[0] if answers else {"text": "", "answer_start": 0}
                if answers and context[first["answer_start"]:first["answer_start"] + len(first["text"])] \
                        != first["text"]:
                    raise ValueError(f"{path}: question {qa['id']}: answer {first['text']!r} is not at "
                                     f"character {first['answer_start']} of its context.")
                columns["id"].append(str(qa["id"]))
                columns["context"].append(context)
                columns["question"].append(qa["question"])
                columns["answer_text"].append("" if impossible else first["text"])
                columns["answer_start"].append(0 if impossible else int(first["answer_start"]))
                columns["is_impossible"].append(impossible)
                columns["all_answers"].append([a["text"] for a in answers])
    if not columns["id"]:
        raise ValueError(f"{path}: no questions.")
    return columns


# --------------------------------------------------------------------------- TFDS
def _tfds_split(task, role):
    spec = dataset_spec(task.dataset)
    if role == "train":
        return task.train_split or spec.train_split
    return task.eval_split or spec.eval_split


def _from_tfds(task, role, shuffle_files, data_dir):
    import tensorflow_datasets as tfds  # import time: it takes seconds; only TFDS sources need it

    spec = dataset_spec(task.dataset)
    split = _tfds_split(task, role)
    ds = tfds.load(task.dataset, split=split, shuffle_files=shuffle_files,
                   data_dir=data_dir or None)
    entry = task_type(spec.task_type)
    return entry.example_kind(_TFDS_EXAMPLES)(ds, task, spec, entry)


def _tfds_texts(ds, task, spec, entry):
    fields = list(task.text_fields or spec.text_fields)

    def canonical(ex):
        out = {"text": ex[fields[0]], "label": ex[task.label_field or spec.label_field]}
        if len(fields) > 1:
            out["text_pair"] = ex[fields[1]]
        out["label"] = tf.cast(out["label"], tf.float32 if entry.score_labels else tf.int32)
        return out

    ds = ds.map(canonical)
    if not entry.score_labels:
        ds = ds.filter(lambda ex: ex["label"] >= 0)  # GLUE test splits carry -1
    return ds


def _tfds_questions(ds, task, spec, entry):
    def canonical_squad(ex):
        texts = ex["answers"]["text"]
        starts = ex["answers"]["answer_start"]
        has_answer = tf.size(texts) > 0
        impossible = tf.logical_not(has_answer)
        if "is_impossible" in ex:
            impossible = tf.logical_or(impossible, tf.cast(ex["is_impossible"], tf.bool))
        return {
            "id": ex["id"], "context": ex["context"], "question": ex["question"],
            "answer_text": tf.where(impossible, "", tf.cond(has_answer, lambda: texts[0], lambda: "")),
            "answer_start": tf.where(impossible, 0, tf.cond(
                has_answer, lambda: tf.cast(starts[0], tf.int32), lambda: 0)),
            "is_impossible": impossible,
        }
    return ds.map(canonical_squad)


def _tfds_choices(ds, task, spec, entry):
    num_choices = spec.num_choices

    def per_question(ex):
        options = ex["options"]
        if not isinstance(options, tf.RaggedTensor):
            options = tf.RaggedTensor.from_tensor(options)
        options = options.to_tensor(default_value="", shape=[None, num_choices])  # [Q, C]
        count = tf.minimum(tf.minimum(tf.shape(ex["questions"])[0], tf.shape(ex["answers"])[0]),
                           tf.shape(options)[0])
        letters = tf.strings.unicode_decode(ex["answers"][:count], "UTF-8").to_tensor(
            default_value=ord("A"), shape=[None, 1])[:, 0]
        questions = tf.data.Dataset.from_tensor_slices({
            "question": ex["questions"][:count], "options": options[:count],
            "label": tf.clip_by_value(tf.cast(letters - ord("A"), tf.int32), 0, num_choices - 1)})
        return questions.map(lambda q: {**q, "context": ex["article"]})
    return ds.flat_map(per_question)


def _tfds_words(ds, task, spec, entry):
    return ds.map(lambda ex: {"tokens": ex["tokens"],
                              "tags": tf.cast(ex[task.label_field or spec.label_field], tf.int32)})


# A TFDS dataset's examples in the canonical fields, by kind of example (`TaskType.example_kind`).
_TFDS_EXAMPLES = types.SimpleNamespace(text=_tfds_texts, choices=_tfds_choices, words=_tfds_words,
                                       windows=_tfds_questions)


def raw_dataset(task, role, shuffle_files=False, data_dir=None):
    """Unbatched canonical examples of the training (`role="train"`) or evaluation set.

    Args:
        task: a resolved `xlnet_tf.tasks.task_spec.TaskSpec`.
        role: "train" or "eval".
        shuffle_files: let TFDS shuffle its files (training).
        data_dir: TFDS data directory (None = default).
    """
    if role not in ("train", "eval"):
        raise ValueError(f"role must be 'train' or 'eval', got {role!r}.")
    path = task.train_file if role == "train" else task.eval_file
    if path:
        columns = read_local_examples(path, task)
        columns.pop("all_answers", None)
        ds = tf.data.Dataset.from_tensor_slices(columns)
    elif task.dataset:
        ds = _from_tfds(task, role, shuffle_files, data_dir)
    else:
        raise ValueError(f"No {role} data: set task.dataset (TFDS name) or task.{role}_file.")
    limit = task.max_train_examples if role == "train" else task.max_eval_examples
    if limit:
        ds = ds.take(limit)
    return ds


def squad_eval_references(task, data_dir=None):
    """`(contexts, gold_answers)` dicts keyed by question id, for SQuAD evaluation."""
    if task.eval_file:
        columns = _read_squad_json(task.eval_file)
        items = zip(columns["id"], columns["context"], columns["all_answers"])
        items = list(items)[: task.max_eval_examples or None]
        return ({i: c for i, c, _ in items}, {i: list(a) for i, _, a in items})
    import tensorflow_datasets as tfds  # import time: it takes seconds; only TFDS sources need it

    ds = tfds.load(task.dataset, split=_tfds_split(task, "eval"), data_dir=data_dir or None)
    if task.max_eval_examples:
        ds = ds.take(task.max_eval_examples)
    contexts, golds = {}, {}
    for ex in ds.as_numpy_iterator():
        qid = ex["id"].decode("utf-8")
        contexts[qid] = ex["context"].decode("utf-8")
        golds[qid] = [t.decode("utf-8") for t in ex["answers"]["text"]]
    return contexts, golds


# --------------------------------------------------------------------------- encoding
def _packer(task, tokenizer, **kwargs):
    # A long document (task.max_segments > 1) is packed as one window of S*L pieces.
    return XLNetPacker(packed_length(task.sequence_length, task.max_segments),
                       truncate=kwargs.pop("truncate", task.truncate), **kwargs)


def _text_encoder(task, tokenizer, with_truncation=False):
    packer = _packer(task, tokenizer)

    def encode(batch):
        texts = [batch["text"]] + ([batch["text_pair"]] if "text_pair" in batch else [])
        features, segments = encode_text(tokenizer, packer, texts)  # [B, S*L]
        truncated = truncated_rows(features["padding_mask"], segments)  # [B]
        features = to_segments(features, task.max_segments, task.sequence_length)  # [B, S, L] when S > 1
        if with_truncation:
            return features, batch["label"], tf.cast(truncated, tf.int32)
        return features, batch["label"]
    return encode


def _token_encoder(task, tokenizer, with_truncation=False):
    # Tags are per position: no long-document layout.
    packer = XLNetPacker(task.sequence_length, truncate=task.truncate)
    label_packer = word_label_packer(packer)

    def encode(batch):
        features, labels, pieces = encode_words(tokenizer, packer, batch["tokens"], batch["tags"], label_packer)
        if with_truncation:
            truncated = truncated_rows(features["padding_mask"], [pieces])  # [B]
            return features, labels, tf.cast(truncated, tf.int32)
        return features, labels
    return encode


def _choice_encoder(task, tokenizer, with_truncation=False):
    packer = _packer(task, tokenizer, truncate="keep_second",
                     second_max_length=task.max_qa_length or None)

    def encode(example):
        features, segments = encode_choices(tokenizer, packer, example["context"][None],
                                            example["question"][None], example["options"][None])  # [C, S*L]
        # A question is truncated when any of its choices lost pieces.
        truncated = tf.reduce_any(truncated_rows(features["padding_mask"], segments))
        # The static number of choices (the model reshapes its scores to [B, C]).
        features = {k: tf.ensure_shape(v, [example["options"].shape[0], v.shape[-1]]) for k, v in features.items()}
        features = to_segments(features, task.max_segments, task.sequence_length)  # [C, S, L] when S > 1
        if with_truncation:
            return features, example["label"], tf.cast(truncated, tf.int32)
        return features, example["label"]
    return encode


def _records_dataset(task, role, training, seed, with_truncation=False):
    """`(features, labels)` from `xlnet-tf prepare-finetuning` records, in this module's label layout."""
    manifest = read_finetuning_manifest(task.records_dir)
    records_type, length = manifest["task"]["task_type"], int(manifest["sequence_length"])
    if records_type != task.task_type or length != task.sequence_length:
        raise ValueError(f"{task.records_dir}: records are {records_type!r} with sequence length {length}, but "
                         f"the config says {task.task_type!r} / {task.sequence_length}.")
    segments = records_max_segments(manifest)
    if segments != task.max_segments:
        raise ValueError(f"{task.records_dir}: records were packed with max_segments {segments} but the config "
                         f"says task.max_segments {task.max_segments}; prepare them again with "
                         f"--max-segments {task.max_segments} or set task.max_segments={segments}.")
    split = (task.train_split or "train") if role == "train" else (task.eval_split or "validation")
    ds = finetuning_record_dataset(task.records_dir, split, shuffle=training, seed=seed,
                                   with_truncation=with_truncation)
    if with_truncation:
        ds = ds.map(lambda features, label: (
            {k: v for k, v in features.items() if k != TRUNCATED_KEY}, label, features[TRUNCATED_KEY]))
    ds = task_type(records_type).example_kind(_RECORD_LABELS)(ds)
    limit = task.max_train_examples if role == "train" else task.max_eval_examples
    return ds.take(limit) if limit else ds


def _window_labels(ds):
    """A span window's record labels as the model's training outputs (the end head reads the gold start)."""
    def to_model(features, label):
        features = {**features, "start_positions": label["start_position"]}
        return features, {"start_logits": label["start_position"],
                          "end_logits": label["end_position"],
                          "cls_logits": tf.cast(label["is_impossible"], tf.float32)}
    return ds.map(to_model)


def _as_recorded(ds):
    return ds


# Records' `(features, labels)` in this module's label layout, by kind of example (`TaskType.example_kind`).
_RECORD_LABELS = types.SimpleNamespace(text=_as_recorded, choices=_as_recorded, words=_as_recorded,
                                       windows=_window_labels)


def _uses_records(task, role):
    if not task.records_dir:
        return False
    if role == "train":
        return not task.train_file
    return not (task.eval_file or task.dataset)


def finetuning_dataset(task, tokenizer, role, batch_size, training=None, seed=0, data_dir=None,
                       with_truncation=False):
    """Batched `(features, labels)` for training or evaluation.

    Args:
        task: a resolved `TaskSpec` (`xlnet_tf.finetuning.finetuning_config.resolve_task`).
        tokenizer: an `xlnet_tf.preprocessing.xlnet_tokenizer.XLNetTokenizer`.
        role: "train" or "eval" (which file / split to read).
        batch_size: examples (windows for span tasks) per batch.
        training: shuffle, repeat forever and drop the remainder (static batch).
            Defaults to `role == "train"`.
        seed: shuffling seed.
        data_dir: TFDS data directory.
        with_truncation: yield `(features, labels, truncated)`, `truncated` int32
            `[B]`: 1 for an example the packer cut to fit `max_segments *
            sequence_length` pieces (a multiple-choice question: any of its
            choices), else 0; -1 (unknown) from records written without the flag.
            Not for span tasks, whose windows cover the whole passage.

    Returns:
        A `tf.data.Dataset`. For span evaluation use `squad_eval_dataset`. A
        training dataset reshuffles every pass with seeds drawn from one
        generator shared by all its iterators (derived datasets such as
        `skip` included): only its first iterator yields the order fixed by
        `seed`, so iterate it once (a resumed run's `skip` then lands where
        the uninterrupted run was); take sample batches from `sample_batch`.
    """
    training = role == "train" if training is None else training
    entry = task_type(task.task_type)
    if with_truncation:
        entry.check_truncation_request()
    if _uses_records(task, role):
        ds = _records_dataset(task, role, training, seed, with_truncation)
        if training:
            ds = ds.shuffle(_SHUFFLE_BUFFER, seed=seed).repeat()
        return ds.batch(batch_size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)
    raw = raw_dataset(task, role, shuffle_files=training, data_dir=data_dir)
    batches = entry.example_kind(_BATCHES)
    return batches(raw, task, tokenizer, batch_size, training, seed, with_truncation)


def _shuffled(ds, training, seed):
    return ds.shuffle(_SHUFFLE_BUFFER, seed=seed).repeat() if training else ds


def _text_batches(raw, task, tokenizer, batch_size, training, seed, with_truncation):
    raw = _shuffled(raw, training, seed).batch(batch_size, drop_remainder=training)
    encode = _text_encoder(task, tokenizer, with_truncation)
    return raw.map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _word_batches(raw, task, tokenizer, batch_size, training, seed, with_truncation):
    # Variable-length word lists.
    raw = _shuffled(raw, training, seed).ragged_batch(batch_size, drop_remainder=training)
    encode = _token_encoder(task, tokenizer, with_truncation)
    return raw.map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _choice_batches(raw, task, tokenizer, batch_size, training, seed, with_truncation):
    encode = _choice_encoder(task, tokenizer, with_truncation)
    ds = _shuffled(raw, training, seed).map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)


def _window_batches(raw, task, tokenizer, batch_size, training, seed, with_truncation):
    pre = _squad_preprocessor(task, tokenizer)

    def windows(ex):
        w = pre(ex["context"], ex["question"], ex["answer_start"], ex["answer_text"],
                ex["is_impossible"])
        features = {k: w[k] for k in ("token_ids", "segment_ids", "padding_mask", "answer_mask",
                                      "start_positions")}
        labels = {"start_logits": w["start_positions"], "end_logits": w["end_positions"],
                  "cls_logits": tf.cast(w["is_impossible"], tf.float32)}
        return tf.data.Dataset.from_tensor_slices((features, labels))

    ds = _shuffled(raw.flat_map(windows), training, seed)
    return ds.batch(batch_size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)


# Raw examples -> batched `(features, labels)`, by kind of example (`TaskType.example_kind`).
_BATCHES = types.SimpleNamespace(text=_text_batches, choices=_choice_batches, words=_word_batches,
                                 windows=_window_batches)


def sample_batch(task, tokenizer, batch_size, data_dir=None):
    """The first `(features, labels)` batch of the training data in file order, from its own pipeline.

    For building a model's loss, metrics and optimizer before `fit`: reading it
    from the training dataset itself would open an iterator there and shift the
    shuffle order `fit` sees (see `finetuning_dataset`).

    Args:
        task: a resolved `TaskSpec`.
        tokenizer: an `xlnet_tf.preprocessing.xlnet_tokenizer.XLNetTokenizer`.
        batch_size: examples (windows for span tasks) in the batch (fewer when the data is smaller).
        data_dir: TFDS data directory.

    Returns:
        `(features, labels)` tensors laid out as `finetuning_dataset`'s.

    Example:
    >>> from xlnet_tf.data.finetuning import sample_batch
    >>> features, labels = sample_batch(task, tokenizer, 8)  # doctest: +SKIP
    """
    ds = finetuning_dataset(task, tokenizer, "train", batch_size, training=False, data_dir=data_dir)
    for batch in ds.take(1):
        return batch
    raise ValueError("The training data is empty: no batch to build the model's loss and metrics on.")


def _squad_preprocessor(task, tokenizer):
    return XLNetSquadPreprocessor(tokenizer, sequence_length=task.sequence_length,
                                  max_query_length=task.max_query_length, doc_stride=task.doc_stride)


def squad_eval_dataset(task, tokenizer, batch_size, data_dir=None):
    """Evaluation windows with what post-processing needs.

    Returns:
        A dataset of dicts: the model features (`token_ids`, `segment_ids`,
        `padding_mask`, `answer_mask`) plus `example_id` (tf.string),
        `piece_start_bytes`, `piece_end_bytes`, `token_is_max_context`.
    """
    raw = raw_dataset(task, "eval", data_dir=data_dir)
    pre = _squad_preprocessor(task, tokenizer)
    keys = ("token_ids", "segment_ids", "padding_mask", "answer_mask", "piece_start_bytes",
            "piece_end_bytes", "token_is_max_context")

    def windows(ex):
        w = pre(ex["context"], ex["question"])
        out = {k: w[k] for k in keys}
        out["example_id"] = tf.fill(tf.shape(w["window_index"]), ex["id"])
        return tf.data.Dataset.from_tensor_slices(out)

    return raw.flat_map(windows).batch(batch_size).prefetch(tf.data.AUTOTUNE)


def local_file_label_names(task):
    """Label names for a local classification/token task whose file has string labels."""
    if task.label_names or not task.train_file or not task_type(task.task_type).label_names_from_file:
        return task.label_names
    return infer_label_names(task.train_file, task.label_field or "label")


def local_file_num_choices(task):
    """Options per question of a local multiple-choice training file (0 when there is none to read, and for
    other task types).

    `check_local_files` makes sure every row has the same number; the export needs it
    (`preprocessing.json`'s `num_classes`) to give its signatures a static choices axis.
    """
    if not task.train_file or not tf.io.gfile.exists(task.train_file):
        return 0
    return task_type(task.task_type).options_in_file(task.train_file) or 0


def task_from_data(task, entry, manifest):
    """`task` completed from its data: the label names and class count its files or records give, checked.

    `entry` is the task's `TaskType`. A local file's string labels name the classes (task
    types with `label_names_from_file`), a multiple-choice file's options count them, and
    records alone give what their manifest recorded (`manifest`, the parsed manifest of
    `task.records_dir`, read by the caller: `records_manifest`); then both local files are
    read in full, so a bad row fails before anything is written or trained.

    Raises:
        ConfigError: a file cannot be read, its labels disagree with the config, or a
            class count the task type needs is still unknown.

    Example:
    >>> # skip-example: reads the training file that `config.task` names
    >>> from xlnet_tf.data.finetuning import task_from_data, task_type
    >>> from xlnet_tf.data.finetuning_record_dataset import records_manifest
    >>> entry = task_type(config.task.task_type)
    >>> task = task_from_data(config.task, entry, records_manifest(config.task, entry))
    >>> task.label_names
    ['negative', 'positive']
    """
    try:
        label_names = None if task.label_names else local_file_label_names(task)
        num_choices = 0 if task.num_classes else local_file_num_choices(task)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(f"task.train_file: {e}") from e
    recorded = manifest["task"] if manifest and not (task.train_file or task.dataset) else None
    try:
        task = entry.with_data_classes(task, label_names, num_choices, recorded)
        check_local_files(task)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    return task


def has_text_pair(task):
    """Whether classification inputs are pairs (two text fields)."""
    if task.records_dir and not (task.train_file or task.dataset):
        return bool(read_finetuning_manifest(task.records_dir)["task"].get("has_text_pair"))
    if task.dataset and not task.train_file:
        return len(task.text_fields or dataset_spec(task.dataset).text_fields) > 1
    path = task.train_file or task.eval_file
    fields = list(task.text_fields or ["text", "text_pair"])
    if len(fields) < 2 or not path or not task_type(task.task_type).pairs:
        return False
    return tf.io.gfile.exists(path) and any(
        isinstance(row, dict) and row.get(fields[1]) is not None for _, row in example_rows.rows(path))


def has_question(task):
    """Whether a multiple-choice run's examples carry questions; None when only its records say (they do not),
    and for other task types.

    A local file's rows are read as `canonical_choices` reads them (a missing or null
    `question` is the empty one); RACE (`task.dataset`) always has questions. A model
    fine-tuned without any packed each choice alone after the context, so its serving
    signature takes no question (`preprocessing.json`'s `has_question`).
    """
    def train_rows():
        if not task.train_file or not tf.io.gfile.exists(task.train_file):
            return None
        return (row for _, row in example_rows.rows(task.train_file))

    return task_type(task.task_type).has_question(task, train_rows)
