"""`SavedModelPredictor`: runs an exported task SavedModel's strings-in signature on Python strings."""

import json
import os

import tensorflow as tf

from xlnet_tf import tasks
from xlnet_tf.formats.preset_files import TASK_CONFIG_FILE
from xlnet_tf.formats.serving_metadata import METADATA_FILE
from xlnet_tf.serving.prediction_record import prediction_record

# The strings-in signature's inputs of a text task: a text and, for pairs, its second text.
DEFAULT_INPUTS = ("text", "text_pair")


def _gfile():
    # The model may be on any tf.io.gfile filesystem (gs://, ram://).
    return tf.io.gfile


def _read_metadata(model_dir):
    """The serving metadata next to the SavedModel, or {} when there is none."""
    path = os.path.join(model_dir, METADATA_FILE)
    if not _gfile().exists(path):
        return {}
    with _gfile().GFile(path, "r") as f:
        return json.load(f)


NEEDS_TASK_EXPORT = ("`xlnet-tf predict` needs the SavedModel of a fine-tuned task: fine-tune one with "
                     "`xlnet-tf finetune --init PRESET --workdir RUN ...`, then export it with "
                     "`xlnet-tf export --workdir RUN --output DIR` and pass --model DIR.")


def _not_a_saved_model(model_dir):
    """Why `model_dir` (no `saved_model.pb`) cannot be predicted with, and what to pass instead."""
    files = _gfile()
    if not files.exists(model_dir):
        return f"{model_dir!r} does not exist."
    if not files.isdir(model_dir):
        return f"{model_dir!r} is a file; pass the SavedModel directory (the one holding saved_model.pb)."
    if files.exists(os.path.join(model_dir, "saved_model", "saved_model.pb")):
        # The `xlnet-tf export` layout of a pretraining run: preset/ + saved_model/ (a backbone).
        return f"{model_dir!r} is the export of a pretrained backbone; {NEEDS_TASK_EXPORT}"
    if files.exists(os.path.join(model_dir, "final", TASK_CONFIG_FILE)) or files.exists(
            os.path.join(model_dir, TASK_CONFIG_FILE)):
        return (f"{model_dir!r} is a fine-tuning run (or task preset), not a SavedModel; export it first: "
                f"`xlnet-tf export --workdir {model_dir} --output DIR`, then pass --model DIR.")
    return f"{model_dir!r} is not a SavedModel directory (no saved_model.pb)."


class SavedModelPredictor:
    """An exported task SavedModel (`xlnet-tf export`) answering raw text, one JSON-ready dict per example.

    Only the SavedModel is used (its `serving_default` signature: tokenizer and
    packer run inside the graph), so the answers are what a TensorFlow Serving
    deployment of the same directory gives.

    Args:
        model_dir: the SavedModel directory (local or any `tf.io.gfile` scheme).

    Raises:
        ValueError: `model_dir` holds no SavedModel, or one without a strings-in
            `serving_default` signature (an ids-only export).

    Attributes:
        task: the task type (from the serving metadata; without it, guessed from the inputs).
        input_names: the signature's `(first, second)` inputs, e.g. `("text", "text_pair")`.
        has_pair: whether the signature takes the second input.
        num_choices: choices per example of a multiple-choice model, else 0.
        label_names: class names in id order, or None.

    Example:
    >>> predictor = SavedModelPredictor("exports/mrpc/1")
    >>> list(predictor.predict([("The cat sat.", "A cat was sitting.")]))
    [{'text': 'The cat sat.', 'text_pair': 'A cat was sitting.', 'label': ..., 'probabilities': [...]}]
    """

    def __init__(self, model_dir):
        if not _gfile().exists(os.path.join(model_dir, "saved_model.pb")):
            raise ValueError(_not_a_saved_model(model_dir))
        metadata = _read_metadata(model_dir)
        # import time: registers the SentencePiece ops of a strings-in model; loaded with the model
        import tensorflow_text  # noqa: F401

        try:
            self._loaded = tf.saved_model.load(model_dir)
        except (OSError, ValueError, tf.errors.OpError) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(f"{model_dir!r}: the SavedModel cannot be loaded ({reason}); export it again with "
                             "`xlnet-tf export`.") from e
        self._signature = self._loaded.signatures.get("serving_default")
        names = (sorted(self._signature.structured_input_signature[1]) if self._signature is not None
                 else [])
        if self._signature is None or "token_ids" in names:
            if not metadata.get("task_type"):
                # No task metadata: the backbone SavedModel of a pretraining export.
                raise ValueError(f"{model_dir!r} is a pretrained backbone (token ids in, hidden states out); "
                                 f"{NEEDS_TASK_EXPORT}")
            raise ValueError(f"{model_dir!r} is a {metadata['task_type']} model exported ids-only (no "
                             "strings-in `serving_default`); export it again with the strings-in signature "
                             "(`xlnet-tf export --workdir RUN --output DIR`, or `export_task_workdir` with "
                             "text_signature=True, the default).")
        self.task = metadata.get("task_type") or next(
            (name for name, entry in tasks.TASKS.items() if len(entry.serving_inputs) > 1
             and set(entry.serving_inputs) <= set(names)), tasks.DEFAULT_TASK_TYPE)
        entry = tasks.task_type(self.task)
        # (first, second): `(text, text_pair)`, `(context, question)` or `(context, choices)`.
        self.input_names = ((entry.serving_inputs[0], entry.serving_inputs[-1]) if len(entry.serving_inputs) > 1
                            else DEFAULT_INPUTS)
        self.takes_choices = entry.layout == tasks.CHOICES
        self.has_pair = self.input_names[1] in names
        self.num_choices = int(metadata.get("num_choices") or 0)
        self.label_names = metadata.get("label_names")

    def _feed(self, batch):
        """The signature's string tensors for a batch of rows."""
        first, second = self.input_names
        feed = {first: tf.constant([row[0].encode("utf-8") for row in batch], tf.string)}
        if self.takes_choices:
            feed[second] = tf.constant([[c.encode("utf-8") for c in row[-1]] for row in batch], tf.string)
            feed["question"] = tf.constant([(row[1] if len(row) == 3 else "").encode("utf-8") for row in batch],
                                           tf.string)
        elif self.has_pair:
            feed[second] = tf.constant([(p or "").encode("utf-8") for _, p in batch], tf.string)
        return feed

    def _checked_row(self, number, row):
        """`row` as a tuple (a bare string is a text alone); a row the signature cannot take is an error."""
        if isinstance(row, str):
            row = (row, None)
        sizes = (2, 3) if self.takes_choices else (2,)
        if not isinstance(row, (tuple, list)) or len(row) not in sizes:
            raise ValueError(f"row {number}: expected {' or '.join(map(str, sizes))} fields "
                             f"({self.input_names[0]}, ...), got {row!r}.")
        if not self.takes_choices and not self.has_pair and row[1] not in (None, ""):
            raise ValueError(f"row {number}: this {self.task} model takes one text (its signature has no "
                             f"{self.input_names[1]!r} input), but the row has a second text {row[1]!r}.")
        return tuple(row)

    def predict(self, rows, batch_size=32, top_k=0):
        """Yields one `prediction_record` per row, calling the model on `batch_size` rows at a time.

        Args:
            rows: `(first, second)` pairs of valid Unicode strings: `(text, text_pair
                or None)` (or a bare `text`), `(context, question)`, or `(context, [choices])` /
                `(context, question, [choices])`. A second text for a model that takes one
                text is an error naming the row.
            batch_size: rows per call (>= 1).
            top_k: classification: also list the k most probable labels (0: off).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        rows = [self._checked_row(number, row) for number, row in enumerate(rows)]
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            outputs = {k: v.numpy() for k, v in self._signature(**self._feed(batch)).items()}
            for i, row in enumerate(batch):
                yield prediction_record(self.task, row, outputs, i, self.label_names, top_k)
