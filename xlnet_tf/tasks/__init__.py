"""The task table: one entry per fine-tuning task type, everything each path needs to know about it.

The tf.data reader, the Beam job, `xlnet-tf finetune`, export and serving look a task type
up here (`task_type(name)`) and read its entry; none of them compares task names. Adding a
task type means one entry here plus its model class (whose `preprocessor_cls` names its
preprocessor) and, for a new input layout, its row reader in `xlnet_tf.tasks.example_rows`
and its encoder in `xlnet_tf.preprocessing.task_encoding`.

Model and preprocessor classes are named by import path and imported on first use: the
Beam workers read the table without loading Keras.

Example:
>>> from xlnet_tf import tasks
>>> tasks.task_type("multiple_choice").serving_inputs
('context', 'question', 'choices')
>>> tasks.task_type("regression").record_label_keys
('label',)
"""

import dataclasses
import importlib
from collections.abc import Callable

from xlnet_tf.tasks import example_rows
from xlnet_tf.formats import finetuning_records as records

# The task type names (the table's keys), for declarations elsewhere such as the TFDS dataset list.
CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTIPLE_CHOICE = "multiple_choice"
TOKEN_CLASSIFICATION = "token_classification"
SPAN = "span"

# Input layouts: how a raw example becomes packed ids (`xlnet_tf.preprocessing.task_encoding`).
TEXT = "text"  # a text or a pair -> [B, L] (long documents: [B, S, L])
CHOICES = "choices"  # context, question, C options -> [B, C, L]
WORDS = "words"  # word lists + word tags -> [B, L] + per-position labels
WINDOWS = "windows"  # SQuAD passage + question -> document-stride windows

# Evaluations (`xlnet_tf.finetuning.evaluation`).
CLASSES = "classes"  # argmax over logits vs class ids
SCORE = "score"  # one float per example vs a float target
TAGS = "tags"  # argmax per position, ignored positions left out
SQUAD = "squad"  # answer text vs gold answers (EM / F1)


@dataclasses.dataclass(frozen=True)
class TaskType:
    """One fine-tuning task type.

    Args:
        name: the `task.task_type` spelling (config, manifests, `preprocessing.json`, serving metadata).
        model: import path of the task model class (its `preprocessor_cls` is the preprocessor).
        model_arguments: `task section -> dict` of the model's constructor arguments (besides the backbone).
        compile_arguments: `task section -> dict` of `default_compile_arguments` keywords (the loss and
            Keras metrics are the model class's).
        min_classes: the smallest valid `task.num_classes` (0: not a class count).
        layout: the input layout (`TEXT`, `CHOICES`, `WORDS`, `WINDOWS`).
        read_row: `(row dict, settings) -> canonical example` of a local JSONL/CSV line
            (`xlnet_tf.tasks.example_rows`); None for SQuAD JSON files.
        example_fields: the canonical fields of a raw example (reader, Beam job, TFDS mapping).
        record_label_keys: label features of a record (`xlnet_tf.formats.finetuning_records`).
        score_labels: labels are floats (regression), else int class ids.
        evaluation: how predictions are scored (`CLASSES`, `SCORE`, `TAGS`, `SQUAD`).
        default_metrics: evaluation metrics (headline first), by `num_classes`.
        serving_inputs: the inputs of the SavedModel's text signature (a pair task adds `text_pair`).
        serving_outputs: what the signatures return.
        long_documents: supports `max_segments` > 1 (segments read through recurrence memory).
        pairs: inputs may be pairs of texts.
        truncate: the packer's truncation rule (None: the task section's `truncate`).
        label_names_from_file: without `task.label_names`, a local file's string labels name the classes.
        label_field: the default label column of a local file.
    """

    name: str
    model: str
    model_arguments: Callable
    compile_arguments: Callable
    min_classes: int
    layout: str
    read_row: Callable | None
    example_fields: tuple[str, ...]
    record_label_keys: tuple[str, ...]
    score_labels: bool
    evaluation: str
    default_metrics: Callable
    serving_inputs: tuple[str, ...]
    serving_outputs: tuple[str, ...]
    long_documents: bool = False
    pairs: bool = False
    truncate: str | None = None
    label_names_from_file: bool = False
    label_field: str = "label"

    def model_class(self):
        """The task model class (imported on first use)."""
        module, _, name = self.model.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def preprocessor_class(self):
        """The keras-hub preprocessor class of the task model."""
        return self.model_class().preprocessor_cls

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


def _class_metrics(num_classes=None):
    return ("accuracy", "f1", "matthews") if num_classes == 2 else ("accuracy",)


_CLASS_OUTPUTS = ("logits", "probabilities", "label", "label_name")

TASKS = {entry.name: entry for entry in (
    TaskType(
        name=CLASSIFICATION,
        model="xlnet_tf.models.xlnet_classifier.XLNetClassifier",
        model_arguments=lambda task: {"num_classes": task.num_classes, "dropout": task.head_dropout},
        compile_arguments=lambda task: {"num_classes": max(int(task.num_classes or 2), 2)},
        min_classes=2, layout=TEXT, read_row=example_rows.canonical_text,
        example_fields=("text", "text_pair", "label"), record_label_keys=(records.LABEL_KEY,),
        score_labels=False, evaluation=CLASSES, default_metrics=_class_metrics,
        serving_inputs=("text",), serving_outputs=_CLASS_OUTPUTS, long_documents=True, pairs=True,
        label_names_from_file=True),
    TaskType(
        name=REGRESSION,
        model="xlnet_tf.models.xlnet_classifier.XLNetClassifier",
        model_arguments=lambda task: {"num_classes": 1, "dropout": task.head_dropout},
        compile_arguments=lambda task: {"num_classes": 1},
        min_classes=0, layout=TEXT, read_row=example_rows.canonical_score,
        example_fields=("text", "text_pair", "label"), record_label_keys=(records.LABEL_KEY,),
        score_labels=True, evaluation=SCORE, default_metrics=lambda num_classes=None: ("pearson_spearman",),
        serving_inputs=("text",), serving_outputs=("score",), long_documents=True, pairs=True),
    TaskType(
        name=MULTIPLE_CHOICE,
        model="xlnet_tf.models.xlnet_multiple_choice.XLNetMultipleChoice",
        model_arguments=lambda task: {"dropout": task.head_dropout},
        compile_arguments=lambda task: {},
        min_classes=0, layout=CHOICES, read_row=example_rows.canonical_choices,
        example_fields=("context", "question", "options", "label"), record_label_keys=(records.LABEL_KEY,),
        score_labels=False, evaluation=CLASSES, default_metrics=lambda num_classes=None: ("accuracy",),
        serving_inputs=("context", "question", "choices"), serving_outputs=_CLASS_OUTPUTS[:3],
        long_documents=True, truncate="keep_second"),
    TaskType(
        name=TOKEN_CLASSIFICATION,
        model="xlnet_tf.models.xlnet_token_classifier.XLNetTokenClassifier",
        model_arguments=lambda task: {"num_classes": task.num_classes, "dropout": task.head_dropout},
        compile_arguments=lambda task: {},
        min_classes=2, layout=WORDS, read_row=example_rows.canonical_words,
        example_fields=("tokens", "tags"), record_label_keys=(records.LABELS_KEY,),
        score_labels=False, evaluation=TAGS, default_metrics=lambda num_classes=None: ("accuracy", "macro_f1"),
        serving_inputs=("text",), serving_outputs=("logits", "probabilities", "labels", "label_names", "pieces"),
        label_field="tags"),
    TaskType(
        name=SPAN,
        model="xlnet_tf.models.xlnet_span_labeler.XLNetSpanLabeler",
        model_arguments=lambda task: {"start_n_top": task.start_n_top, "end_n_top": task.end_n_top,
                                      "dropout": task.head_dropout},
        compile_arguments=lambda task: {},
        min_classes=0, layout=WINDOWS, read_row=None,
        example_fields=("id", "context", "question", "answer_text", "answer_start", "is_impossible"),
        record_label_keys=records.SPAN_LABEL_KEYS,
        score_labels=False, evaluation=SQUAD, default_metrics=lambda num_classes=None: ("squad",),
        serving_inputs=("context", "question"),
        serving_outputs=("answer", "start_top_log_probs", "start_top_index", "end_top_log_probs",
                         "end_top_index", "cls_logits")),
)}

TASK_TYPES = tuple(TASKS)
# Task types whose models read long documents segment by segment (`max_segments` > 1).
LONG_DOCUMENT_TASK_TYPES = tuple(name for name, entry in TASKS.items() if entry.long_documents)
# The task type a local text file is read as when the config names none.
DEFAULT_TASK_TYPE = CLASSIFICATION


def task_type(name):
    """The entry of task type `name`.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if isinstance(name, TaskType):
        return name
    if name in TASKS:
        return TASKS[name]
    raise ValueError(f"Unknown task type {name!r}; expected one of {list(TASK_TYPES)}.")


def of_model(model):
    """The task type of a task model (a class or an instance): the class's entry; regression by `num_classes` 1."""
    cls = model if isinstance(model, type) else type(model)
    path = f"{cls.__module__}.{cls.__name__}"
    matches = [entry for entry in TASKS.values() if entry.model == path]
    if not matches:
        return None
    if len(matches) > 1:
        # One class for classification and regression: one output is a score.
        wanted = getattr(model, "num_classes", 2) == 1
        return next(entry for entry in matches if entry.score_labels == wanted)
    return matches[0]


def of_model_class_name(class_name, num_classes=None):
    """The task type of a task model named `class_name` (a preset's `task.json`), or None."""
    for entry in TASKS.values():
        if entry.model.rpartition(".")[2] == class_name and entry.score_labels == (num_classes == 1):
            return entry
    for entry in TASKS.values():
        if entry.model.rpartition(".")[2] == class_name:
            return entry
    return None
