"""Each task model class registers itself for its task types; `TaskType.model_class()` looks it up."""

import pytest

from xlnet_tf import tasks
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
from xlnet_tf.tasks import task_models


def test_every_task_type_gets_the_class_that_registered_for_it():
    expected = {tasks.CLASSIFICATION: XLNetClassifier, tasks.REGRESSION: XLNetClassifier,
                tasks.MULTIPLE_CHOICE: XLNetMultipleChoice, tasks.SPAN: XLNetSpanLabeler,
                tasks.TOKEN_CLASSIFICATION: XLNetTokenClassifier}
    assert {name: tasks.task_type(name).model_class() for name in tasks.TASK_TYPES} == expected


def test_a_second_class_for_a_task_type_is_refused(monkeypatch):
    monkeypatch.setattr(task_models, "TASK_MODELS", dict(task_models.TASK_MODELS))

    class Other:
        pass

    with pytest.raises(ValueError, match="two model classes: XLNetSpanLabeler and Other"):
        task_models.register_task_model(tasks.SPAN)(Other)


def test_a_task_type_without_a_registered_class_says_what_to_import(monkeypatch):
    monkeypatch.setattr(task_models, "TASK_MODELS", {})
    with pytest.raises(LookupError, match="import xlnet_tf.models first"):
        tasks.task_type(tasks.SPAN).model_class()
