"""The task model class of each task type, registered where the class is defined.

The task types sit below the models (the Beam workers read them without Keras), so a task
type never imports its model: each task model class registers itself for its task types
with `@register_task_model`, and `TaskType.model_class()` looks it up here.

Example:
>>> from xlnet_tf import XLNetTask
>>> from xlnet_tf.tasks import register_task_model
>>> from xlnet_tf import tasks
>>> @register_task_model(tasks.CLASSIFICATION)  # doctest: +SKIP
... class XLNetClassifier(XLNetTask):
...     ...
"""

# Task type name -> its task model class.
TASK_MODELS = {}


def register_task_model(*task_type_names):
    """Class decorator: `cls` is the task model of the task types `task_type_names`.

    Raises:
        ValueError: a task type that already has another model class.
    """

    def register(cls):
        for name in task_type_names:
            registered = TASK_MODELS.setdefault(name, cls)
            if registered is not cls:
                raise ValueError(f"Task type {name!r} has two model classes: {registered.__name__} "
                                 f"and {cls.__name__}.")
        return cls

    return register


def task_model_class(task_type_name):
    """The task model class registered for `task_type_name`.

    Raises:
        LookupError: no class is registered, most often because `xlnet_tf.models` was not imported.
    """
    if task_type_name not in TASK_MODELS:
        raise LookupError(f"No task model class is registered for the task type {task_type_name!r}: "
                          "import xlnet_tf.models first (each task model class registers itself there).")
    return TASK_MODELS[task_type_name]
