"""Classification: a text or a pair of texts -> one of `num_classes` labels."""

from xlnet_tf.formats import finetuning_records as records
from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks import task_kinds
from xlnet_tf.tasks.task_type import TaskType
from xlnet_tf.tasks.task_type import register_task_type

# What a class-label task's signatures return.
CLASS_OUTPUTS = ("logits", "probabilities", "label", "label_name")


@register_task_type
class ClassificationTask(TaskType):
    """A text or a pair of texts -> one of `num_classes` labels (GLUE, IMDB, your own labels).

    Example:
    >>> from xlnet_tf import tasks
    >>> tasks.task_type("classification").default_metrics(2)
    ('accuracy', 'f1', 'matthews')
    """

    name = task_kinds.CLASSIFICATION
    min_classes = 2
    layout = task_kinds.TEXT
    example_fields = ("text", "text_pair", "label")
    record_label_keys = (records.LABEL_KEY,)
    evaluation = task_kinds.CLASSES
    serving_inputs = ("text",)
    serving_outputs = CLASS_OUTPUTS
    long_documents = True
    pairs = True
    label_names_from_file = True

    # --- The model: which class, built how ----------------------------------------------------

    def model_arguments(self, task):
        return {"num_classes": task.num_classes, "dropout": task.head_dropout}

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        return example_rows.canonical_text(row, settings)

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        return signature_outputs.classes(outputs)

    def prediction_answer(self, answers, pick):
        return answers.classes(pick)

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("accuracy", "f1", "matthews") if num_classes == 2 else ("accuracy",)

    def with_data_classes(self, task, label_names=None, num_choices=0, recorded=None):
        task = super().with_data_classes(task, label_names, num_choices, recorded)
        if self.min_classes and not task.num_classes:
            raise ValueError("task.num_classes is not set and cannot be inferred (integer labels): set "
                             "task.num_classes.")
        return task
