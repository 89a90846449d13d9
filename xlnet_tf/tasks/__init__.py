"""The fine-tuning task types: one object per type, which every room asks about its task.

The tf.data reader, the Beam job, `xlnet-tf finetune`, export and serving look a task type
up here (`task_type(name)`) and call its methods; none of them compares task names or
layouts. Each task type is one file of this package with a `TaskType` subclass registered
by `@register_task_type`; adding a task type is that file plus one import line below.

Each task model class registers itself for its task types where it is defined
(`@register_task_model`, `task_models.py`): the Beam workers read the table without loading Keras.

Example:
>>> from xlnet_tf import tasks
>>> tasks.task_type("multiple_choice").serving_inputs
('context', 'question', 'choices')
>>> tasks.task_type("regression").record_label_keys
('label',)
"""

from xlnet_tf.tasks.task_kinds import CHOICES
from xlnet_tf.tasks.task_kinds import CLASSES
from xlnet_tf.tasks.task_kinds import CLASSIFICATION
from xlnet_tf.tasks.task_kinds import MULTIPLE_CHOICE
from xlnet_tf.tasks.task_kinds import REGRESSION
from xlnet_tf.tasks.task_kinds import SCORE
from xlnet_tf.tasks.task_kinds import SPAN
from xlnet_tf.tasks.task_kinds import SQUAD
from xlnet_tf.tasks.task_kinds import TAGS
from xlnet_tf.tasks.task_kinds import TEXT
from xlnet_tf.tasks.task_kinds import TOKEN_CLASSIFICATION
from xlnet_tf.tasks.task_kinds import WINDOWS
from xlnet_tf.tasks.task_kinds import WORDS
from xlnet_tf.tasks.task_models import TASK_MODELS
from xlnet_tf.tasks.task_models import register_task_model
from xlnet_tf.tasks.task_type import REGISTERED_TASK_TYPES
from xlnet_tf.tasks.task_type import TaskType
from xlnet_tf.tasks.task_type import register_task_type

# The registry: one import per task type (each file registers its class).
from xlnet_tf.tasks import classification  # noqa: F401
from xlnet_tf.tasks import regression  # noqa: F401
from xlnet_tf.tasks import multiple_choice  # noqa: F401
from xlnet_tf.tasks import token_classification  # noqa: F401
from xlnet_tf.tasks import span  # noqa: F401

__all__ = [
    "CHOICES", "CLASSES", "CLASSIFICATION", "DEFAULT_TASK_TYPE", "LONG_DOCUMENT_TASK_TYPES", "MULTIPLE_CHOICE",
    "REGRESSION", "SCORE", "SPAN", "SQUAD", "TAGS", "TASKS", "TASK_TYPES", "TEXT", "TOKEN_CLASSIFICATION",
    "TaskType", "WINDOWS", "WORDS", "of_model", "of_model_class_name", "register_task_model", "register_task_type",
    "task_type",
]

TASKS = REGISTERED_TASK_TYPES
TASK_TYPES = tuple(TASKS)
# Task types whose models read long documents segment by segment (`max_segments` > 1).
LONG_DOCUMENT_TASK_TYPES = tuple(name for name, entry in TASKS.items() if entry.long_documents)
# The task type a local text file is read as when the config names none.
DEFAULT_TASK_TYPE = CLASSIFICATION


def task_type(name):
    """The task type named `name` (a `TaskType` is returned as it is).

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
    matches = [entry for entry in TASKS.values() if TASK_MODELS.get(entry.name) is cls]
    if not matches:
        return None
    if len(matches) > 1:
        # One class for classification and regression: one output is a score.
        wanted = getattr(model, "num_classes", 2) == 1
        return next(entry for entry in matches if entry.score_labels == wanted)
    return matches[0]


def of_model_class_name(class_name, num_classes=None):
    """The task type of a task model named `class_name` (a preset's `task.json`), or None."""
    named = [entry for entry in TASKS.values()
             if getattr(TASK_MODELS.get(entry.name), "__name__", None) == class_name]
    return next((entry for entry in named if entry.score_labels == (num_classes == 1)), named[0] if named else None)
