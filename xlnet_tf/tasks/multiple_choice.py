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

    def example_kind(self, kinds):
        return kinds.choices

    def row_settings(self, task, num_choices=None):
        # Every row must have the same number of options.
        return {**super().row_settings(task), "num_choices": num_choices}

    def options_in_file(self, path):
        return example_rows.num_options(path)

    def num_choices(self, task):
        return task.num_classes

    def resolve_num_choices(self, first_file, dataset):
        # The choices axis of every record: the first row's number of options (or the dataset's).
        num_choices = example_rows.num_options(first_file) if first_file else dataset.num_choices
        if not num_choices:
            raise ValueError("the first row has no 'options' list.")
        return num_choices

    def records_num_classes(self, task):
        # The number of options, the model's classes.
        return task.num_classes

    def records_have_pairs(self, task):
        # Two segments: the context, then the question with an option.
        return True

    def record_choices(self, manifest_task):
        return int(manifest_task["num_classes"])

    def has_question(self, task, train_rows):
        # Records do not say; RACE always has questions; a local file's rows read as `read_row` reads them.
        if task.records_dir and not (task.train_file or task.dataset):
            return None
        if task.dataset and not task.train_file:
            return True
        rows = train_rows()
        if rows is None:
            return None
        return any(isinstance(row, dict) and str(row.get("question") or "") != "" for row in rows)

    # --- Serving: the signature's inputs, decoding a prediction -------------------------------

    def serving_choices(self, serving, num_choices, takes_question):
        return serving.rows_per_choice(num_choices, takes_question)

    def serving_text_signature(self, serving):
        return serving.choices_signature()

    def decode_serving_outputs(self, signature_outputs, outputs, features):
        return signature_outputs.classes(outputs)

    def prediction_inputs(self, row):
        # `(context, [choices])` for a model fine-tuned without questions, else `(context, question, [choices])`.
        return {"context": row[0], **({"question": row[1]} if len(row) == 3 else {}), "choices": row[-1]}

    def prediction_answer(self, answers, pick):
        return answers.classes(pick)

    def checked_prediction_row(self, predictor, row, where):
        return predictor.checked_choice_row(row, where)

    def prediction_feed(self, predictor, batch):
        return predictor.choice_feed(batch)

    def metadata_describes_rows(self, metadata):
        # The rows need C choices; an export that does not record C says it only once loaded.
        return bool(metadata.get("num_choices"))

    # --- Evaluation and fine-tuning -------------------------------------------------------------

    def default_metrics(self, num_classes=None):
        return ("accuracy",)

    def with_data_classes(self, task, label_names=None, num_choices=0, recorded=None):
        # The number of options is the class count: the export's static choices axis.
        if not task.num_classes and num_choices:
            task = task.replace(num_classes=num_choices)
        return super().with_data_classes(task, label_names, num_choices, recorded)

    def preprocessing_fields(self, task, has_question=None):
        return {"second_max_length": task.max_qa_length, "truncate": self.truncate,
                "text_fields": ["context", "question", "options"], "has_question": has_question}

    def export_arguments(self, preprocessing, where):
        # Fine-tuning records the number of choices as the number of classes.
        num_choices = preprocessing.get("num_choices") or preprocessing.get("num_classes")
        if not isinstance(num_choices, int) or isinstance(num_choices, bool) or num_choices < 1:
            raise ValueError(f"{where}: a multiple_choice export needs num_choices "
                             f"(or num_classes), an int >= 1, got {num_choices!r}.")
        # `has_question` false: every training example had an empty question, so the signature
        # takes none. Absent or null (records, older runs): it takes one, and a client says "" for none.
        has_question = preprocessing.get("has_question")
        if has_question is not None and not isinstance(has_question, bool):
            raise ValueError(f"{where}: has_question must be true, false or null, got {has_question!r}.")
        return {"num_choices": num_choices, "takes_question": has_question is not False}
