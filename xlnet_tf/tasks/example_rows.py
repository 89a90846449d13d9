"""The one reader of local fine-tuning files (JSONL, CSV/TSV): lines -> canonical examples.

Both the tf.data reader (`xlnet_tf.data.finetuning`) and the Beam job
(`xlnet_tf.beam.finetuning_data`) read local files here, so a line means the same
example on both paths. By default a bad line is a `ValueError` naming the file and the
line; the Beam job passes `skip_bad=True`, which yields `Skipped(reason)` in its place so
the job counts it (the manifest accounts for every line). The rules of each task type's
row (which fields, which labels are valid) are `canonical_*` functions that the task table
(`xlnet_tf.tasks`) names, one per task type.

Light on purpose (no TensorFlow at import): Beam workers import it.

Example:
>>> from xlnet_tf.tasks import TASKS
>>> from xlnet_tf.tasks.example_rows import read_examples
>>> for number, example in read_examples("train.jsonl", TASKS["classification"],  # doctest: +SKIP
...                                      {"text_fields": ["text"], "label_field": "label"}):
...     print(number, example)
"""

import collections
import csv
import io
import json
import math

from xlnet_tf.storage import line_ranges

# Why a line is skipped under `skip_bad=True` (the Beam job's counters and manifest).
SKIP_REASONS = ("undecodable", "missing_field", "empty", "bad_label")

# A skipped line, in place of its canonical example: why (one of `SKIP_REASONS`) and what was wrong.
Skipped = collections.namedtuple("Skipped", ["reason", "message"])


class ExampleError(ValueError):
    """A line that is not an example of its task: `reason` is one of `SKIP_REASONS`."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def is_csv(path):
    """Whether `path` is read as CSV/TSV (by its extension) rather than JSONL."""
    return path.lower().endswith((".csv", ".tsv"))


def _open_binary(path):
    # import time: `xlnet-tf prepare-finetuning` reads the files before it loads TensorFlow's ops
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"Fine-tuning data file not found: {path}")
    return tf.io.gfile.GFile(path, "rb")


def _csv_rows(path):
    with _open_binary(path) as f:
        data = f.read()
    try:
        text, repaired = data.decode("utf-8"), False
    except UnicodeDecodeError:
        # Only rows that hold a replaced byte are undecodable; the rest are kept.
        text, repaired = data.decode("utf-8", errors="replace"), True
    # Read whole: a quoted field may hold a newline, so no byte offset is a safe cut.
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if path.lower().endswith(".tsv") else ",")
    for number, row in enumerate(reader, start=2):
        if repaired and any("\ufffd" in v for v in row.values() if isinstance(v, str)):
            yield number, ExampleError("undecodable", "not valid UTF-8.")
        else:
            yield number, row


def rows(path, start=0, end=None, first_line=1):
    """`(line number, dict | ExampleError)` of a JSONL / CSV / TSV file, blank lines left out.

    JSONL is streamed, and only the lines that start in the byte range
    `[start, end)` are read (`first_line` is the number of the range's first
    line; `xlnet_tf.storage.line_ranges`). CSV/TSV is read whole (`start` 0).
    """
    if is_csv(path):
        yield from _csv_rows(path)
        return
    if not start:
        _open_binary(path).close()  # a missing file is named before anything else
    for number, (_, line) in enumerate(line_ranges.lines_in_range(path, start, end), start=first_line):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            yield number, ExampleError("undecodable", f"not valid JSON ({e}). Expected one JSON object per "
                                       "line (JSONL), or a .csv/.tsv file with a header.")
            continue
        if not isinstance(row, dict):
            yield number, ExampleError("undecodable", f"expected a JSON object, got {type(row).__name__}.")
            continue
        yield number, row


def read_examples(path, task_type, settings, *, skip_bad=False, start=0, end=None, first_line=1):
    """`(line number, canonical example | Skipped)` of a local file, through `task_type.read_row`.

    Args:
        path: a JSONL / CSV / TSV file.
        task_type: an entry of `xlnet_tf.tasks.TASKS`.
        settings: a dict with `text_fields`, `label_field`, `label_names`, `num_classes` (any may be
            missing or None).
        skip_bad: yield `Skipped(reason)` for a bad line instead of raising.
        start, end, first_line: the byte range to read (JSONL) and its first line's number.

    Raises:
        ValueError: `"{path}:{line}: ..."`, a bad line (unless `skip_bad`).
        FileNotFoundError: no such file.
    """
    for number, row in rows(path, start, end, first_line):
        try:
            if isinstance(row, ExampleError):
                raise row
            yield number, task_type.read_row(row, settings)
        except ExampleError as e:
            if not skip_bad:
                raise ValueError(f"{path}:{number}: {e}") from None
            yield number, Skipped(e.reason, str(e))


def empty_file_message(path):
    return f"{path} has no examples (the file is empty or holds only blank lines / a CSV header)."


# --------------------------------------------------------------------------- labels


def is_int(value):
    """Whether a raw label is an integer (`3`, `"3"`), not a float or a name."""
    try:
        return float(value) == int(float(value)) and "." not in str(value)
    except (TypeError, ValueError, OverflowError):
        return False


def infer_label_names(paths, label_field="label"):
    """Sorted distinct string labels of `paths`; None when all labels are integers.

    Lines without the label (or unreadable ones) are left to the reader, which names them.

    Raises:
        ValueError: the files hold no label at all.
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    labels = set()
    for path in paths:
        for _, row in rows(path):
            if isinstance(row, dict) and row.get(label_field) is not None:
                labels.add(str(row[label_field]))
    if not labels:
        # Said here: "no labels" would otherwise read as "labels cannot be inferred".
        raise ValueError(empty_file_message(", ".join(paths)))
    if all(is_int(label) for label in labels):
        return None
    return sorted(labels)


def label_id(value, label_names=None, num_classes=None):
    """The class id of a raw label: a name of `label_names`, or an integer id in range.

    Raises:
        ExampleError: "bad_label", saying what is wrong.
    """
    if label_names:
        if str(value) in label_names:
            return list(label_names).index(str(value))
        if is_int(value) and 0 <= int(value) < len(label_names):
            return int(value)
        raise ExampleError("bad_label", f"label {value!r} is not one of {list(label_names)}.")
    if not is_int(value):
        raise ExampleError("bad_label", f"label {value!r} is not an integer class id; set "
                           "task.label_names to map string labels.")
    label = int(value)
    if label < 0 or (num_classes and label >= num_classes):
        raise ExampleError("bad_label", f"label {label} is outside [0, {num_classes or 'num_classes'}).")
    return label


def _field(row, name, required=True):
    if name in row and row[name] is not None:
        return row[name]
    if required:
        raise ExampleError("missing_field", f"missing field {name!r} (fields present: {sorted(row)}).")
    return None


# --------------------------------------------------------------------------- one row per task type


def _text_fields(settings):
    fields = list(settings.get("text_fields") or ["text", "text_pair"])
    return fields[0], (fields[1] if len(fields) > 1 else None)


def canonical_text(row, settings, score=False):
    """`{"text", "text_pair", "label"}` of a classification (or, `score`, regression) row.

    An empty text is an example like any other (packed `<sep> <cls>`); a missing
    `text_pair` is an empty one.
    """
    first, second = _text_fields(settings)
    text = str(_field(row, first))
    pair = _field(row, second, required=False) if second else None
    value = _field(row, settings.get("label_field") or "label")
    if score:
        try:
            label = float(value)
        except (TypeError, ValueError, OverflowError):
            label = float("nan")
        if math.isnan(label):
            raise ExampleError("bad_label", f"regression label {value!r} is not a number.")
    else:
        label = label_id(value, settings.get("label_names"), settings.get("num_classes"))
    return {"text": text, "text_pair": "" if pair is None else str(pair), "label": label,
            "has_pair": pair is not None}


def canonical_score(row, settings):
    """`canonical_text` of a regression row (a float label)."""
    return canonical_text(row, settings, score=True)


def canonical_choices(row, settings):
    """`{"context", "question", "options", "label"}` of a multiple-choice (RACE) row; the question may be absent."""
    context = str(_field(row, "context"))
    question = str(_field(row, "question", required=False) or "")
    options = _field(row, "options")
    expected = settings.get("num_choices")
    if not isinstance(options, list) or (expected and len(options) != expected):
        raise ExampleError("bad_label", "'options' must be a list with the same number of choices in every row.")
    label = label_id(_field(row, settings.get("label_field") or "label"), None, len(options))
    return {"context": context, "question": question, "options": [str(o) for o in options], "label": label}


def canonical_words(row, settings):
    """`{"tokens", "tags"}` of a token-classification row: words and one tag (id or name) per word."""
    words = _field(row, "tokens")
    tags = _field(row, settings.get("label_field") or "tags")
    if not isinstance(words, list) or not isinstance(tags, list) or len(words) != len(tags):
        raise ExampleError("bad_label", "'tokens' and the tags must be lists of equal length.")
    ids = [label_id(tag, settings.get("label_names"), settings.get("num_classes")) for tag in tags]
    return {"tokens": [str(w) for w in words], "tags": ids}


def num_options(path):
    """Options per question of a multiple-choice file: the first readable row's (every row must match), or None."""
    for _, row in rows(path):
        if isinstance(row, dict):
            options = row.get("options")
            return len(options) if isinstance(options, list) else None
    return None
