"""The task model a fine-tuning run trains: from its initial preset, compiled under the run's strategy.

A task preset continues with its own head and settings (the `from_preset` of the task type's
model class, which refuses a preset of another task model). A backbone preset gets the
fine-tuning `XLNetConfig` its run resolved (`FinetuningInputs.backbone_config`) and a new head
of the task's type (`TaskType.build_model`). Either is compiled with the task's own loss and
metrics (`XLNetTask.compile`) and the optimizer of the run's `optimizer` section
(`optimizer_arguments`), the one `XLNetTask.compile()` builds by default.
"""

import keras

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.training.run_sections import optimizer_arguments


def finetuning_model(inputs, setup):
    """The run's task model, built and compiled under `setup.strategy`.

    Args:
        inputs: the run's `FinetuningInputs`.
        setup: the run's `RunSetup`.

    Returns:
        The compiled task model (`model.optimizer` is the run's optimizer, not built yet).

    Example:
    >>> # skip-example: reads the initial preset that `config.training.init_from` names
    >>> from xlnet_tf.finetuning.finetuning_model import finetuning_model
    >>> model = finetuning_model(FinetuningInputs.resolve(config), setup)
    >>> type(model).__name__
    'XLNetClassifier'
    """
    config, t = inputs.config, inputs.config.training
    with setup.strategy.scope():
        keras.utils.set_random_seed(t.seed)
        try:
            if inputs.preset.is_task_preset:
                model = inputs.task_type.model_class().from_preset(inputs.preset)
            else:
                dtype = None if t.mixed_precision == "float32" else t.mixed_precision
                backbone = XLNetBackbone.from_preset(inputs.preset, dtype=dtype, config=inputs.backbone_config)
                model = inputs.task_type.build_model(config.task, backbone)
                model.build_with_dummy_inputs()
        except ValueError as e:  # a class count below what the task type needs
            raise ConfigError(str(e)) from e
        model.backbone.rematerialize = t.rematerialize
        model.compile(jit_compile=t.jit_compile, steps_per_execution=t.steps_per_execution,
                      **optimizer_arguments(config.optimizer, t))
    return model
