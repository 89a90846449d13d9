"""`TaskType`: the base class of a fine-tuning task type, and the registry of the task types.

A task type is one object that every room asks about its task: the fields of its examples,
how a row of a local file is read and checked, how it is packed for the model, what the
Beam job writes, what the serving signature takes and returns, how a prediction is decoded
and how it is evaluated. Each task type is one file of this package with one subclass,
registered with `@register_task_type`; nothing outside `xlnet_tf.tasks` branches on a task
type's name or layout.

Light on purpose (no TensorFlow or Keras at import): the Beam workers read the table.

Example:
>>> from xlnet_tf import tasks
>>> entry = tasks.task_type("classification")
>>> entry.record_label_keys
('label',)
"""

from xlnet_tf.tasks.task_models import task_model_class

# The registered task types, by name, in registration order.
REGISTERED_TASK_TYPES = {}


def register_task_type(cls):
    """Class decorator: registers one instance of a `TaskType` subclass under its `name`.

    Raises:
        ValueError: a second task type with the same name.
    """
    if cls.name in REGISTERED_TASK_TYPES:
        raise ValueError(f"Task type {cls.name!r} is registered twice "
                         f"({type(REGISTERED_TASK_TYPES[cls.name]).__name__} and {cls.__name__}).")
    REGISTERED_TASK_TYPES[cls.name] = cls()
    return cls


class TaskType:
    """One fine-tuning task type. Subclasses set the class attributes and override the methods.

    Attributes:
        name: the `task.task_type` spelling (config, manifests, `preprocessing.json`, serving metadata).
        min_classes: the smallest valid `task.num_classes` (0: not a class count).
        layout: the input layout (`xlnet_tf.tasks.TEXT`, `CHOICES`, `WORDS`, `WINDOWS`).
        example_fields: the canonical fields of a raw example (reader, Beam job, TFDS mapping).
        record_label_keys: label features of a record (`xlnet_tf.formats.finetuning_records`).
        score_labels: labels are floats (regression), else int class ids.
        evaluation: how predictions are scored (`xlnet_tf.tasks.CLASSES`, `SCORE`, `TAGS`, `SQUAD`).
        serving_inputs: the inputs of the SavedModel's text signature (a pair task adds `text_pair`).
        serving_outputs: what the signatures return.
        long_documents: supports `max_segments` > 1 (segments read through recurrence memory).
        pairs: inputs may be pairs of texts.
        truncate: the packer's truncation rule (None: the task section's `truncate`).
        label_names_from_file: without `task.label_names`, a local file's string labels name the classes.
        label_field: the default label column of a local file.
        reads_rows: examples come from local JSONL/CSV rows (`read_row`); False for SQuAD JSON files.
    """

    name = None
    min_classes = 0
    layout = None
    example_fields = ()
    record_label_keys = ()
    score_labels = False
    evaluation = None
    serving_inputs = ()
    serving_outputs = ()
    long_documents = False
    pairs = False
    truncate = None
    label_names_from_file = False
    label_field = "label"
    reads_rows = True

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"

    # --- The model: which class, built how ----------------------------------------------------

    def model_class(self):
        """The task model class, registered by `@register_task_model` where it is defined (`xlnet_tf.models`)."""
        return task_model_class(self.name)

    def preprocessor_class(self):
        """The keras-hub preprocessor class of the task model."""
        return self.model_class().preprocessor_cls

    def model_arguments(self, task):
        """The model's constructor arguments (besides the backbone) for a resolved task section."""
        return {"dropout": task.head_dropout}

    def build_model(self, task, backbone):
        """The task model of a resolved task section on `backbone`.

        Raises:
            ValueError: `task.num_classes` is below what the task needs.
        """
        if self.min_classes and (task.num_classes or 0) < self.min_classes:
            raise ValueError(f"task.num_classes must be >= {self.min_classes} for {self.name} (set it, or "
                             "task.label_names).")
        return self.model_class()(backbone, **self.model_arguments(task))

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        """The canonical example of one row of a local JSONL/CSV file (`xlnet_tf.tasks.example_rows`).

        Raises:
            NotImplementedError: the task type is not read from local JSONL/CSV rows.
        """
        raise NotImplementedError(f"{self.name} examples are not read from JSONL/CSV rows.")

    # The rooms that run TensorFlow (the tf.data reader, the Beam job) keep their code for each kind
    # of example in one `kinds` object (attributes `text`, `choices`, `words`, `windows`); a task type
    # picks its own kind, so this package stays free of TensorFlow and no room asks which task it reads.

    def example_kind(self, kinds):
        """This task type's member of `kinds`: a text or a pair of texts (`kinds.text`)."""
        return kinds.text

    def row_settings(self, task, num_choices=None):
        """What `example_rows.read_examples` needs of `task` (a `TaskSpec`) to read its local files."""
        return {"text_fields": task.text_fields, "label_field": task.label_field,
                "label_names": task.label_names, "num_classes": task.num_classes}

    def options_in_file(self, path):
        """The options per question of a local file's first row (multiple choice); None: not read."""
        return None

    def num_choices(self, task):
        """The options per question of `task`'s examples (multiple choice), else None."""
        return None

    def resolve_num_choices(self, first_file, dataset):
        """The options of every question of a job, from its first file (or, without one, its TFDS `dataset`).

        0 for a task type without options. Raises `ValueError` when there is no options list to count.
        """
        return 0

    def records_num_classes(self, task):
        """The `num_classes` of a records manifest's task: the number of label names, or None."""
        return len(task.label_names) if task.label_names else None

    def records_have_pairs(self, task):
        """Whether records of `task` pack two segments (a manifest's `has_text_pair`)."""
        return len(task.text_fields) > 1

    def record_choices(self, manifest_task):
        """The options flattened in one record, by a records manifest's `task` entry (0: none)."""
        return 0

    def record_label_shape(self, length):
        """The shape of a record's label for packed sequences of `length`: one per example."""
        return []

    def record_window_keys(self):
        """The int features a record holds besides ids, masks and labels (a span window's index)."""
        return ()

    def has_question(self, task, train_rows):
        """Whether the examples carry questions (multiple choice; None for other task types).

        `train_rows()` gives the rows of `task.train_file`, or None when there is none to read.
        """
        return None

    def check_truncation_request(self):
        """Refuses `with_truncation` where the packer never cuts an example (raises `ValueError`)."""

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------
    # Serving passes in its own builders (`xlnet_tf.serving`); a task type picks the ones that fit it, so
    # this package stays free of TensorFlow and of the serving code.

    def serving_choices(self, serving, num_choices, takes_question):
        """`(num_choices, takes_question)` of a `TaskServingModule` (`serving`): one packed row per example."""
        return serving.one_row_per_example(takes_question)

    def serving_text_signature(self, serving):
        """The strings-in function of a `TaskServingModule`: `text` (+ `text_pair`) packed by its preprocessor."""
        return serving.text_signature()

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        """The signature's outputs from the model's `outputs`, built by a `SignatureOutputs`."""
        raise NotImplementedError(f"{type(self).__name__} must define decode_serving_outputs.")

    def prediction_inputs(self, row):
        """The inputs of a `SavedModelPredictor` row under their signature names (a prediction record's start)."""
        text, pair = row[0], row[-1]
        return {"text": text} if pair is None else {"text": text, "text_pair": pair}

    def prediction_answer(self, answers, pick):
        """One example's answer (`pick`: its row of the signature's outputs), JSON-ready, by a `PredictionAnswers`."""
        raise NotImplementedError(f"{type(self).__name__} must define prediction_answer.")

    def checked_prediction_row(self, predictor, row, where):
        """A `SavedModelPredictor` row checked: a text and an optional second one."""
        return predictor.checked_text_row(row, where)

    def prediction_feed(self, predictor, batch):
        """The string tensors a `SavedModelPredictor` feeds its signature for a batch of checked rows."""
        return predictor.text_feed(batch)

    def metadata_describes_rows(self, metadata):
        """Whether an export's serving metadata alone says what rows its strings-in signature takes."""
        return True

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        """The evaluation metrics (headline first) for `num_classes`."""
        raise NotImplementedError(f"{type(self).__name__} must define default_metrics.")

    def resolved_spec(self, task):
        """`task` (a `TaskSpec`) with the fields this task type fixes or defaults filled in."""
        return task

    def check_spec(self, task):
        """Refuses a resolved `TaskSpec` whose settings this task type cannot pack.

        Raises:
            ValueError: naming the `task.*` keys that do not fit.
        """

    def with_data_classes(self, task, label_names=None, num_choices=0, recorded=None):
        """`task` with the classes its training data names where the config leaves them out.

        Args:
            task (TaskSpec): a resolved `TaskSpec`.
            label_names: the string labels of the training file (`label_names_from_file`), or None.
            num_choices: the options per question of the training file (0: none read).
            recorded (dict | None): the `task` of the records manifest when the records are the only data, or None.

        Raises:
            ValueError: the training file's labels disagree with `task.num_classes`, or the
                task type needs a class count that nothing gives.
        """
        if label_names and not task.label_names:
            task = task.replace(label_names=label_names, num_classes=task.num_classes or len(label_names))
            if task.num_classes != len(label_names):
                raise ValueError(f"{task.train_file} has {len(label_names)} distinct labels {label_names} but "
                                 f"task.num_classes is {task.num_classes}.")
        if recorded:
            task = task.replace(label_names=task.label_names or recorded.get("label_names"),
                                num_classes=task.num_classes or int(recorded.get("num_classes") or 0))
        return task

    def evaluates_records(self):
        """Whether the records of `xlnet-tf prepare-finetuning` hold what an evaluation scores."""
        return True

    def evaluate(self, evaluation):
        """The metrics of one evaluation (`xlnet_tf.finetuning.evaluation.TaskEvaluation`), scored this type's way."""
        return evaluation.classes()

    def tuned_spec(self, task, results):
        """`task` with what the final evaluation's `results` tune (kept as it is by default)."""
        return task

    def summary_fields(self, task):
        """What a run's summary reports of its final `task` besides the metrics."""
        return {}

    def preprocessing_fields(self, task, has_question=None):
        """This task type's additions to a task preset's `preprocessing.json` (`has_question`: multiple choice)."""
        return {}

    def export_arguments(self, preprocessing, where):
        """The `export_task_model` arguments this task type reads from a task preset's recorded packing.

        Raises:
            ValueError: naming `where` (the `preprocessing.json` path) and the malformed key.
        """
        return {}

    def export_text_preprocessor(self, preprocessors):
        """The strings-in signature's preprocessor: one of `preprocessors` (`xlnet_tf.serving.export_task_workdir`)."""
        return preprocessors.packed_text()
