"""The task model of a fine-tuning run and its `fit`: from the initial preset, trained from the resume point.

A task preset continues with its own head and settings (the `from_preset` of the task type's
model class, which refuses a preset of another task model). A backbone preset gets the
fine-tuning `XLNetConfig` its run resolved (`FinetuningInputs.backbone_config`) and a new head
of the task's type (`TaskType.build_model`). Either is compiled with the task's own loss and
metrics (`XLNetTask.compile`) and the optimizer of the run's `optimizer` section
(`optimizer_arguments`), the one `XLNetTask.compile()` builds by default. `fit` then reads the
training set from the resume point, with the run's callbacks, everything built on one real batch first.
"""

import os

import keras
import tensorflow as tf

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.training.callbacks import JsonlMetricsLogger, append_jsonl
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
    >>> from xlnet_tf.finetuning.finetuning_fit import finetuning_model
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


def fit_task_model(model, inputs, setup, directory, workdir):
    """Trains `model` from the run's resume point to `training.train_steps`.

    Args:
        model: the run's compiled task model (`finetuning_model`).
        inputs: the run's `FinetuningInputs`.
        setup: the run's `RunSetup`.
        directory: the run's `RunDirectory` (its backup and resume point).
        workdir: the work directory (`metrics.jsonl`).

    Returns:
        The engine's summary (`RunSetup.summary`): replicas, batch sizes, steps, final logs.

    Example:
    >>> # skip-example: trains the model of a run opened in `workdir`
    >>> from xlnet_tf.finetuning.finetuning_fit import fit_task_model
    >>> fit_task_model(model, inputs, setup, directory, "runs/mrpc")["train_steps"]
    1000
    """
    task, t = inputs.config.task, inputs.config.training
    first_step = directory.first_epoch * t.steps_per_epoch
    train = data.finetuning_dataset(task, inputs.tokenizer, "train", setup.global_batch_size, training=True,
                                    seed=t.seed, data_dir=task.data_dir or None)
    if inputs.task_type.score_labels:
        train = train.map(lambda x, y: (x, tf.reshape(y, [-1, 1])))
    if first_step:
        train = train.skip(first_step)
    _build_on_one_batch(model, inputs, setup)
    history = model.fit(train, epochs=t.train_steps // t.steps_per_epoch, steps_per_epoch=t.steps_per_epoch,
                        callbacks=_callbacks(inputs, setup, directory, workdir),
                        verbose=t.verbose if setup.is_chief else 0)
    return setup.summary(history, first_step=first_step, train_steps=t.train_steps)


def _build_on_one_batch(model, inputs, setup):
    """Builds the loss, metrics and optimizer on one real batch, before the backup restores them.

    The same on every backend and strategy, so a run's first step starts from the same state
    wherever it runs. Never from the training dataset: its iterators share one shuffle-seed
    generator, so one opened here (reading ahead past a pass after `skip`) would reorder what
    `fit` trains on.
    """
    task = inputs.config.task
    sample_x, sample_y = data.sample_batch(task, inputs.tokenizer, setup.global_batch_size,
                                           data_dir=task.data_dir or None)
    if inputs.task_type.score_labels:
        sample_y = tf.reshape(sample_y, [-1, 1])  # [B] -> [B, 1]
    with setup.strategy.scope():
        sample_pred = model(sample_x, training=False)
        model.compute_loss(x=sample_x, y=sample_y, y_pred=sample_pred)
        model.compute_metrics(sample_x, sample_y, sample_pred, sample_weight=None)
        model.reset_metrics()
        model.optimizer.build(model.trainable_variables)


def _callbacks(inputs, setup, directory, workdir):
    """The backup callback; on the chief also the metrics.jsonl logger and the per-epoch evaluation."""
    config, t = inputs.config, inputs.config.training
    callbacks = [directory.backup_callback()]
    if not setup.is_chief:
        return callbacks
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    callbacks.append(JsonlMetricsLogger(metrics_path, steps_per_epoch=t.steps_per_epoch,
                                        every_steps=t.log_every_steps, global_batch_size=setup.global_batch_size))
    if inputs.has_eval and config.evaluation.every_epoch:
        callbacks.append(EvaluationCallback(config.task, inputs.tokenizer, config.evaluation.batch_size, metrics_path,
                                            t.steps_per_epoch, config.evaluation.collapse_warning,
                                            verbose=t.verbose))
    return callbacks


class EvaluationCallback(keras.callbacks.Callback):
    """Evaluates at the end of each epoch and appends an `eval` line to metrics.jsonl.

    Example:
    >>> # skip-example: evaluates the task of a resolved run (`inputs`) after each epoch of `fit`
    >>> from xlnet_tf.finetuning.finetuning_fit import EvaluationCallback
    >>> callback = EvaluationCallback(inputs.config.task, inputs.tokenizer, 32, "runs/mrpc/metrics.jsonl",
    ...                               steps_per_epoch=100, collapse_warning=True)
    >>> history = model.fit(train, epochs=3, steps_per_epoch=100, callbacks=[callback])
    """

    def __init__(self, task, tokenizer, batch_size, path, steps_per_epoch, collapse_warning,
                 verbose=1):
        super().__init__()
        self.task, self.tokenizer, self.batch_size = task, tokenizer, batch_size
        self.path, self.steps_per_epoch = path, steps_per_epoch
        self.collapse_warning, self.verbose = collapse_warning, verbose

    def on_epoch_end(self, epoch, logs=None):
        results = evaluate(self.model, self.task, self.tokenizer, self.batch_size,
                           data_dir=self.task.data_dir or None, collapse_warning=self.collapse_warning)
        step = (epoch + 1) * self.steps_per_epoch
        append_jsonl(self.path, {"step": step, "split": "eval", **results})
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in results.items() if isinstance(v, float))
            print(f"eval at step {step}: {shown}")
