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
    layout = task_kinds.WINDOWS
    example_fields = ("id", "context", "question", "answer_text", "answer_start", "is_impossible")
    record_label_keys = records.SPAN_LABEL_KEYS
    evaluation = task_kinds.SQUAD
    serving_inputs = ("context", "question")
    serving_outputs = ("answer", "start_top_log_probs", "start_top_index", "end_top_log_probs",
                       "end_top_index", "cls_logits")
    reads_rows = False

    # --- The model: which class, built how ----------------------------------------------------

    def model_arguments(self, task):
        return {"start_n_top": task.start_n_top, "end_n_top": task.end_n_top, "dropout": task.head_dropout}

    # --- Reading, checking and packing examples; what the Beam job writes ---------------------

    def example_kind(self, kinds):
        return kinds.windows

    def records_have_pairs(self, task):
        # Two segments: the passage and the question.
        return True

    def record_window_keys(self):
        return (records.WINDOW_INDEX_KEY,)

    def check_truncation_request(self):
        raise ValueError("with_truncation is not defined for span tasks: their document-stride windows "
                         "cover the whole passage.")

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    def serving_text_signature(self, serving):
        return serving.span_signature()

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        return signature_outputs.span_beam(outputs)

    def prediction_inputs(self, row):
        return {"context": row[0], "question": row[-1]}

    def prediction_answer(self, answers, pick):
        return answers.span(pick)

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("squad",)

    def resolved_spec(self, task):
        if task.version_2 and task.null_score_threshold is None:
            return task.replace(null_score_threshold=0.0)
        return task

    def check_spec(self, task):
        if task.sequence_length - 3 - task.max_query_length < 1:
            raise ValueError(f"task.sequence_length ({task.sequence_length}) leaves no room for the "
                             f"passage after task.max_query_length ({task.max_query_length}).")

    def evaluates_records(self):
        # The answers are scored against the passages' text, which the records do not keep.
        return False

    def evaluate(self, evaluation):
        return evaluation.squad()

    def tuned_spec(self, task, results):
        # SQuAD 2.0: the best-F1 null threshold of the final evaluation decides "no answer" when serving.
        if task.version_2 and task.tune_null_threshold and results.get("best_f1_thresh") is not None:
            return task.replace(null_score_threshold=float(results["best_f1_thresh"]))
        return task

    def summary_fields(self, task):
        return {"null_score_threshold": task.null_score_threshold}

    def preprocessing_fields(self, task, has_question=None):
        return {"max_query_length": task.max_query_length, "doc_stride": task.doc_stride,
                "max_answer_length": task.max_answer_length,
                "null_score_threshold": task.null_score_threshold, "version_2": task.version_2,
                "text_fields": ["context", "question"]}

    def export_text_preprocessor(self, preprocessors):
        return preprocessors.span_answers()
