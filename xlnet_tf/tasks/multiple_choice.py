"""Multiple choice: a context, a question and C options -> the right option (RACE, SWAG)."""

from xlnet_tf.formats import finetuning_records as records
from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks import task_kinds
from xlnet_tf.tasks.classification import CLASS_OUTPUTS
from xlnet_tf.tasks.task_type import TaskType
from xlnet_tf.tasks.task_type import register_task_type


@register_task_type
class MultipleChoiceTask(TaskType):
    """A context, a question and C options, each packed as one row -> the right option.

    Example:
    >>> from xlnet_tf import tasks
    >>> tasks.task_type("multiple_choice").serving_inputs
    ('context', 'question', 'choices')
    """

    name = task_kinds.MULTIPLE_CHOICE
    model = "xlnet_tf.models.xlnet_multiple_choice.XLNetMultipleChoice"
    layout = task_kinds.CHOICES
    example_fields = ("context", "question", "options", "label")
    record_label_keys = (records.LABEL_KEY,)
    evaluation = task_kinds.CLASSES
    serving_inputs = ("context", "question", "choices")
    serving_outputs = CLASS_OUTPUTS[:3]
    long_documents = True
    truncate = "keep_second"

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        return example_rows.canonical_choices(row, settings)

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("accuracy",)
