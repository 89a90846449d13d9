"""Regression: a text or a pair of texts -> one float score (STS-B)."""

from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks import task_kinds
from xlnet_tf.tasks.classification import ClassificationTask
from xlnet_tf.tasks.task_type import register_task_type


@register_task_type
class RegressionTask(ClassificationTask):
    """A text or a pair of texts -> one float score: the classifier's model with one output.

    Example:
    >>> from xlnet_tf import tasks
    >>> tasks.task_type("regression").serving_outputs
    ('score',)
    """

    name = task_kinds.REGRESSION
    min_classes = 0
    score_labels = True
    evaluation = task_kinds.SCORE
    serving_outputs = ("score",)
    label_names_from_file = False

    # --- The model: which class, built how ----------------------------------------------------

    def model_arguments(self, task):
        return {"num_classes": 1, "dropout": task.head_dropout}

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def read_row(self, row, settings):
        return example_rows.canonical_score(row, settings)

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        return signature_outputs.score(outputs)

    def prediction_answer(self, answers, pick):
        return answers.score(pick)

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("pearson_spearman",)

    def resolved_spec(self, task):
        # One output: the score.
        return task.replace(num_classes=1)

    def evaluate(self, evaluation):
        return evaluation.scores()
