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


def _check_string(value, name, where):
    """`value` must be a string (a number or a list is a mistake, not a text)."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: `{name}` must be a string, got {type(value).__name__} {value!r:.60}.")


def _describes_rows(metadata, inputs):
    """Whether the metadata alone says what rows the model takes: its task, inputs (and choices)."""
    if metadata.get("task_type") not in tasks.TASKS or not isinstance(inputs, list):
        return False
    return tasks.task_type(metadata["task_type"]).metadata_describes_rows(metadata)


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
    deployment of the same directory gives. What the rows must hold is read from
    `xlnet_tf_serving.json` when it says (task, signature inputs, choices), so
    `checked_row` answers before the model loads (`load`, on the first `predict`).

    Args:
        model_dir (str): the SavedModel directory (local or any `tf.io.gfile` scheme).

    Raises:
        ValueError: `model_dir` holds no SavedModel, or one without a strings-in
            `serving_default` signature (an ids-only export); without metadata,
            also a SavedModel that cannot be loaded.

    Attributes:
        task: the task type (from the serving metadata; without it, guessed from the inputs).
        input_names: the signature's `(first, second)` inputs, e.g. `("text", "text_pair")`.
        has_pair: whether the signature takes the second input.
        takes_choices: whether the model is a multiple-choice one.
        takes_question: multiple choice: whether the signature takes a `question` (the model was
            fine-tuned with questions, or its export does not say otherwise); False for other tasks.
        num_choices: choices per example of a multiple-choice model, else 0.
        label_names: class names in id order, or None.

    Example:
    >>> from xlnet_tf.serving import SavedModelPredictor
    >>> predictor = SavedModelPredictor("exports/mrpc/1")
    >>> list(predictor.predict([("The cat sat.", "A cat was sitting.")]))
    [{'text': 'The cat sat.', 'text_pair': 'A cat was sitting.', 'label': ..., 'probabilities': [...]}]
    """

    def __init__(self, model_dir):
        if not _gfile().exists(os.path.join(model_dir, "saved_model.pb")):
            raise ValueError(_not_a_saved_model(model_dir))
        self._model_dir = model_dir
        metadata = _read_metadata(model_dir)
        self._loaded = self._signature = self._metadata_inputs = None
        names = ((metadata.get("signatures") or {}).get("serving_default") or {}).get("inputs")
        if _describes_rows(metadata, names):
            self._metadata_inputs = sorted(names)
        else:
            # Only the loaded model says what its signature takes.
            names = self.load()
        if not names or "token_ids" in names:
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
        self.takes_choices = "choices" in entry.serving_inputs
        self.has_pair = self.input_names[1] in names
        self.takes_question = self.takes_choices and "question" in names
        self.num_choices = int(metadata.get("num_choices") or self._choices_width() or 0)
        self.label_names = metadata.get("label_names")

    def load(self):
        """Loads the SavedModel (once); returns its `serving_default` inputs (none without that signature).

        The constructor reads what the rows must be from `xlnet_tf_serving.json`, so
        rows can be checked before the model loads; `predict` loads it.

        Raises:
            ValueError: the SavedModel cannot be loaded, or its signature takes other
                inputs than its metadata says.
        """
        if self._signature is None:
            # import time: registers the SentencePiece ops of a strings-in model; loaded with the model
            import tensorflow_text  # noqa: F401

            try:
                loaded = tf.saved_model.load(self._model_dir)
            except (OSError, ValueError, tf.errors.OpError) as e:
                reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ValueError(f"{self._model_dir!r}: the SavedModel cannot be loaded ({reason}); export it "
                                 "again with `xlnet-tf export`.") from e
            signature = loaded.signatures.get("serving_default")
            names = sorted(signature.structured_input_signature[1]) if signature is not None else []
            if self._metadata_inputs not in (None, names):
                raise ValueError(f"{self._model_dir!r}: its serving_default takes {names}, but "
                                 f"{METADATA_FILE} says {self._metadata_inputs}; export it again with "
                                 "`xlnet-tf export`.")
            self._loaded, self._signature = loaded, signature
        return sorted(self._signature.structured_input_signature[1]) if self._signature is not None else []

    def _choices_width(self):
        """The static choices axis of a loaded signature, else None."""
        spec = self._signature.structured_input_signature[1].get("choices") if self._signature is not None else None
        return spec.shape[-1] if spec is not None else None

    def _first_feed(self, batch):
        """The signature's first string input (`text` or `context`) for a batch of checked rows."""
        return {self.input_names[0]: tf.constant([row[0].encode("utf-8") for row in batch], tf.string)}

    def text_feed(self, batch):
        """The signature's string tensors for a batch of checked `(text, text_pair or None)` rows."""
        feed = self._first_feed(batch)
        if self.has_pair:
            feed[self.input_names[1]] = tf.constant([(p or "").encode("utf-8") for _, p in batch], tf.string)
        return feed

    def choice_feed(self, batch):
        """The signature's string tensors for a batch of checked multiple-choice rows."""
        feed = self._first_feed(batch)
        feed[self.input_names[1]] = tf.constant([[c.encode("utf-8") for c in row[-1]] for row in batch], tf.string)
        if self.takes_question:
            feed["question"] = tf.constant([row[1].encode("utf-8") for row in batch], tf.string)
        return feed

    def checked_row(self, row, where):
        """`row` as the tuple `predict` feeds; a row the model cannot take is a `ValueError` naming `where`.

        Args:
            row (str | tuple | dict): see `predict`.
            where (str): how the error names the row (`"row 3"`, `"rows.jsonl:4"`).

        Returns:
            `(text, text_pair or None)`, `(context, question)`, or for multiple choice
            `(context, question, [choices])` when the model takes a question, else
            `(context, [choices])`.
        """
        return tasks.task_type(self.task).checked_prediction_row(self, row, where)

    def checked_text_row(self, row, where):
        """`checked_row` of a model reading a text and an optional second one (`text_pair`, `question`)."""
        if isinstance(row, str):
            row = (row, None)
        if not isinstance(row, (tuple, list)) or len(row) != 2:
            raise ValueError(f"{where}: expected 2 fields ({self.input_names[0]}, ...), got {row!r}.")
        if not self.has_pair and row[1] not in (None, ""):
            raise ValueError(f"{where}: this {self.task} model takes one text (its signature has no "
                             f"{self.input_names[1]!r} input), but the row has a second text {row[1]!r}.")
        return tuple(row)

    def checked_choice_row(self, row, where):
        """`checked_row` of a multiple-choice model: a context, a question when it takes one, C choices."""
        if isinstance(row, dict):
            if "choices" not in row and "options" in row:  # the training files' name
                row = {**row, "choices": row["options"]}
            context, question, choices = row.get("context"), row.get("question"), row.get("choices")
        elif isinstance(row, (tuple, list)) and len(row) in (2, 3):
            context, question, choices = row[0], (row[1] if len(row) == 3 else None), row[-1]
        else:
            raise ValueError(f"{where}: expected {{'context', 'question', 'choices'}} or (context, question, "
                             f"[choices]), got {type(row).__name__} {row!r:.80}.")
        if context is None:
            raise ValueError(f"{where}: no `context` (the passage each choice is read with); give it as a string.")
        _check_string(context, "context", where)
        if question is not None:
            _check_string(question, "question", where)
        if self.takes_question and question is None:
            raise ValueError(f"{where}: no `question`: this multiple-choice model was fine-tuned with a question "
                             "before each choice (its signature takes `question`); give the row its question "
                             "(a string, \"\" when it has none).")
        if not self.takes_question and question:
            raise ValueError(f"{where}: this multiple-choice model was fine-tuned without questions (its "
                             f"signature takes `context` and `choices` only), but the row has the question "
                             f"{question!r:.60}; leave the question out.")
        self._check_choices(choices, where)
        return (context, question, list(choices)) if self.takes_question else (context, list(choices))

    def _check_choices(self, choices, where):
        """`choices` must be a list of exactly `num_choices` strings."""
        wanted = f"a list of {self.num_choices} strings, one per option"
        if choices is None:
            raise ValueError(f"{where}: no `choices`; give {wanted}.")
        if not isinstance(choices, (list, tuple)):
            raise ValueError(f"{where}: `choices` must be {wanted}, got {type(choices).__name__} "
                             f"{choices!r:.60}.")
        if len(choices) != self.num_choices:
            got = "none (an empty list)" if not choices else len(choices)
            raise ValueError(f"{where}: this model takes exactly {self.num_choices} choices per question, got "
                             f"{got}.")
        for index, choice in enumerate(choices):
            _check_string(choice, f"choice {index}", where)

    def predict(self, rows, batch_size=32, top_k=0):
        """Yields one `prediction_record` per row, calling the model on `batch_size` rows at a time.

        Args:
            rows (list): valid Unicode strings: `(text, text_pair or None)` (or a bare `text`),
                `(context, question)`; multiple choice: `(context, question, [choices])` or a
                dict `{"context", "question", "choices"}` (`options`, the training files'
                name, is read as `choices`), the question left out (`(context, [choices])`)
                only for a model fine-tuned without questions (`takes_question` False).
                Every row is checked first (`checked_row`): a missing context or
                question, a question for a model that takes none, choices that are not
                `num_choices` strings, or a second text for a model that takes one text
                is a `ValueError` naming the row.
            batch_size: rows per call (>= 1).
            top_k: classification: also list the k most probable labels (0: off).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        rows = [self.checked_row(row, f"row {number}") for number, row in enumerate(rows)]
        self.load()
        entry = tasks.task_type(self.task)
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            feed = entry.prediction_feed(self, batch)
            outputs = {k: v.numpy() for k, v in self._signature(**feed).items()}
            for i, row in enumerate(batch):
                yield prediction_record(self.task, row, outputs, i, self.label_names, top_k)
