"""Span extraction: a passage and a question -> the answer span (SQuAD 1.1 / 2.0)."""

from xlnet_tf.formats import finetuning_records as records
from xlnet_tf.tasks import task_kinds
from xlnet_tf.tasks.task_type import TaskType
from xlnet_tf.tasks.task_type import register_task_type


@register_task_type
class SpanTask(TaskType):
    """A passage and a question, read in document-stride windows -> the answer text (or none).

    Example:
    >>> from xlnet_tf import tasks
    >>> tasks.task_type("span").serving_inputs
    ('context', 'question')
    """

    name = task_kinds.SPAN
    model = "xlnet_tf.models.xlnet_span_labeler.XLNetSpanLabeler"
    layout = task_kinds.WINDOWS
    example_fields = ("id", "context", "question", "answer_text", "answer_start", "is_impossible")
    record_label_keys = records.SPAN_LABEL_KEYS
    evaluation = task_kinds.SQUAD
    serving_inputs = ("context", "question")
    serving_outputs = ("answer", "start_top_log_probs", "start_top_index", "end_top_log_probs",
                       "end_top_index", "cls_logits")
    reads_rows = False

    # --- The model: which class, built how, compiled how --------------------------------------

    def model_arguments(self, task):
        return {"start_n_top": task.start_n_top, "end_n_top": task.end_n_top, "dropout": task.head_dropout}

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("squad",)
