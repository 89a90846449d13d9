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

import importlib

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
        model: import path of the task model class (its `preprocessor_cls` is the preprocessor).
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
    model = None
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

    # --- The model: which class, built how, compiled how --------------------------------------

    def model_class(self):
        """The task model class (imported on first use)."""
        module, _, name = self.model.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def preprocessor_class(self):
        """The keras-hub preprocessor class of the task model."""
        return self.model_class().preprocessor_cls

    def model_arguments(self, task):
        """The model's constructor arguments (besides the backbone) for a resolved task section."""
        return {"dropout": task.head_dropout}

    def compile_arguments(self, task):
        """The `default_compile_arguments` keywords for a resolved task section."""
        return {}

    def build_model(self, task, backbone):
        """The task model of a resolved task section on `backbone`.

        Raises:
            ValueError: `task.num_classes` is below what the task needs.
        """
        if self.min_classes and (task.num_classes or 0) < self.min_classes:
            raise ValueError(f"task.num_classes must be >= {self.min_classes} for {self.name} (set it, or "
                             "task.label_names).")
        return self.model_class()(backbone, **self.model_arguments(task))

    def default_compile_arguments(self, task):
        """`loss`, `loss_weights` and `metrics` for `model.compile`, as the model class's `compile()` uses them."""
        return self.model_class().default_compile_arguments(**self.compile_arguments(task))

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        """The canonical example of one row of a local JSONL/CSV file (`xlnet_tf.tasks.example_rows`).

        Raises:
            NotImplementedError: the task type is not read from local JSONL/CSV rows.
        """
        raise NotImplementedError(f"{self.name} examples are not read from JSONL/CSV rows.")

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        """The evaluation metrics (headline first) for `num_classes`."""
        raise NotImplementedError(f"{type(self).__name__} must define default_metrics.")
