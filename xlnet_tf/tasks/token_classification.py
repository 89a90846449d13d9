"""Token classification: a list of words -> one tag per word (NER, POS)."""

from xlnet_tf.formats import finetuning_records as records
from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks import task_kinds
from xlnet_tf.tasks.task_type import TaskType
from xlnet_tf.tasks.task_type import register_task_type


@register_task_type
class TokenClassificationTask(TaskType):
    """A list of words -> one of `num_classes` tags per word (its first piece carries the label).

    Example:
    >>> from xlnet_tf import tasks
    >>> tasks.task_type("token_classification").record_label_keys
    ('labels',)
    """

    name = task_kinds.TOKEN_CLASSIFICATION
    min_classes = 2
    layout = task_kinds.WORDS
    example_fields = ("tokens", "tags")
    record_label_keys = (records.LABELS_KEY,)
    evaluation = task_kinds.TAGS
    serving_inputs = ("text",)
    serving_outputs = ("logits", "probabilities", "labels", "label_names", "pieces")
    label_field = "tags"

    # --- The model: which class, built how ----------------------------------------------------

    def model_arguments(self, task):
        return {"num_classes": task.num_classes, "dropout": task.head_dropout}

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        return example_rows.canonical_words(row, settings)

    def example_kind(self, kinds):
        return kinds.words

    def record_label_shape(self, length):
        # One tag per position.
        return [length]

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    def serving_text_signature(self, serving):
        return serving.words_signature()

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        return signature_outputs.tags(outputs, features)

    def prediction_answer(self, answers, pick):
        return answers.tags(pick)

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("accuracy", "macro_f1")

    def evaluate(self, evaluation):
        return evaluation.tags()
