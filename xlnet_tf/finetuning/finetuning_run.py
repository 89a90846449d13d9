"""A whole fine-tuning run: model from a preset, `fit` with resume, evaluation, final task preset.

Work directory layout:
- `config.yaml`: the resolved config (has a `task` section; `training.init_from` is the preset);
- `metrics.jsonl`: training lines (step, loss, learning rate, ...) from the pretraining logger,
  plus one `{"step", "split": "eval", ...metrics}` line per evaluation;
- `backup/`: `RunBackup` state (crash-safe, the previous backup kept as `.bkp`); re-running the
  same command resumes;
- `RUN_LOCK`: while a run is active, who holds the work directory (one run at a time);
- `eval_results.json`: the final evaluation;
- `final/`: the fine-tuned task preset in keras-hub's layout (`config.json`, `model.weights.h5`,
  `metadata.json`, `task.json`, `task.weights.h5`, `preprocessor.json`, `tokenizer.json`,
  `assets/tokenizer/vocabulary.spm`, `spiece.model`) plus `preprocessing.json`, the serving
  metadata (task type, packing, text fields, label names, tuned SQuAD `null_score_threshold`);
  read by `XLNetClassifier.from_preset(...)` & co., `load_task_preset` and `xlnet-tf export`.

What the run reads before its first write (the task completed from its data, the initial
preset's vocabulary and config) is resolved once, at the top, by `FinetuningInputs` and handed
down. The strategy, batch split, work directory checks, run lock, config.yaml and backup choice are
the training engine's (`xlnet_tf.training.run_setup`, `xlnet_tf.training.run_directory`), the
same as pretraining's.
"""

import contextlib
import json
import logging
import os

import keras
import tensorflow as tf
import yaml

from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig, memory_off_warning
from xlnet_tf.finetuning.finetuning_inputs import FinetuningInputs
from xlnet_tf.formats.preset_files import MODEL_WEIGHTS_FILE
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io
from xlnet_tf.tasks import task_type
from xlnet_tf.training.run_directory import check_workdir, open_run_directory
from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.training.callbacks import JsonlMetricsLogger
from xlnet_tf.training.run_setup import RunSetup
from xlnet_tf.models.xlnet_task import load_task_preset
from xlnet_tf.optimizers.build_optimizer import build_optimizer
from xlnet_tf.training.run_sections import optimizer_arguments

_log = logging.getLogger(__name__)
FINAL_DIR = "final"


def build_task_model(task, backbone):
    """The task model of `task.task_type` on `backbone` (the task table's model class and arguments)."""
    try:
        return task_type(task.task_type).build_model(task, backbone)
    except ValueError as e:
        raise ConfigError(str(e)) from e


def compile_arguments(task):
    """`loss`, `loss_weights` and `metrics` for `model.compile`: the task class's own defaults
    (`default_compile_arguments`), the same ones its `compile()` uses."""
    return task_type(task.task_type).default_compile_arguments(task)


def _adjustments_yaml(init_adjustments):
    """The `init_adjustments` section of config.yaml ("" when nothing changed)."""
    if not init_adjustments:
        return ""
    return yaml.safe_dump({"init_adjustments": init_adjustments}, sort_keys=False)


def _append_jsonl(path, record):
    with tf.io.gfile.GFile(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def run_finetuning(config: FinetuneConfig, workdir: str, *, strategy=None) -> dict:
    """Fine-tunes (or resumes) the run of `config` in `workdir`; returns a summary dict.

    Args:
        config: a `FinetuneConfig`; `training.init_from` names the initial preset
            (a backbone preset, or a task preset to continue from).
        workdir: work directory (created; re-running resumes from `backup/`). The chief
            holds `workdir/RUN_LOCK` from the first write to the end (`RunLock`).
        strategy (tf.distribute.Strategy | None): a `tf.distribute.Strategy` instead of resolving `config.distribution`.

    Returns:
        `{"eval": {...final metrics...}, "final_dir": path, "train_steps": int, ...}`.

    Example:
    >>> # skip-example: downloads GLUE MRPC from TensorFlow Datasets; tests/notebooks runs this call on the CPU
    >>> from xlnet_tf import finetune_config_from_dict, run_finetuning
    >>> config = finetune_config_from_dict({
    ...     "task": {"dataset": "glue/mrpc"},
    ...     "training": {"init_from": "runs/base/export/preset", "global_batch_size": 32}})
    >>> summary = run_finetuning(config, "runs/mrpc")  # doctest: +SKIP
    >>> summary["final_dir"]  # doctest: +SKIP
    'runs/mrpc/final'
    """
    inputs = FinetuningInputs.resolve(config)
    with contextlib.ExitStack() as run_scope:
        return _run_finetuning(inputs, workdir, run_scope, strategy=strategy)


def _run_finetuning(inputs, workdir, run_scope, *, strategy):
    """`run_finetuning` on resolved inputs; `run_scope` (an ExitStack) releases the run lock when the run ends."""
    setup, directory = _open_run(inputs, workdir, run_scope, strategy)
    model, optimizer = _compiled_model(inputs, setup)
    summary = _train(model, optimizer, inputs, setup, directory, workdir)
    if setup.is_chief:
        summary.update(_finish(model, inputs, workdir))
    return summary


def _open_run(inputs, workdir, run_scope, strategy):
    """The engine's `RunSetup` and the run directory: lock taken, config.yaml written, resume point read."""
    config, task = inputs.config, inputs.config.task
    check_workdir(config.to_dict(), workdir)
    setup = RunSetup.resolve(
        config.distribution, config.training, strategy,
        paths={"task.train_file": task.train_file, "task.eval_file": task.eval_file,
               "task.records_dir": task.records_dir, "task.data_dir": task.data_dir,
               "workdir": workdir}, model_config=inputs.backbone_config)
    setup.announce()
    if setup.backend != "tensorflow":
        # keras.distribution places variables when they are created and data when `fit` reads it
        # (the global batches; several processes each read their share).
        run_scope.enter_context(setup.strategy.scope())
    # Before the first write: a second run on this work directory stops here, naming this one.
    directory = open_run_directory(workdir, config.to_yaml() + setup.devices_yaml()
                                   + _adjustments_yaml(inputs.init_adjustments),
                                   run_scope, is_chief=setup.is_chief, task_id=setup.task_id)
    if setup.is_chief and inputs.init_adjustments:
        changes = ", ".join(f"{k} {json.dumps(v['preset'])} -> {json.dumps(v['finetune'])}"
                            for k, v in inputs.init_adjustments.items())
        print(f"Fine-tuning settings for {config.training.init_from}: {changes} (recorded as "
              "init_adjustments in config.yaml).")
    return setup, directory


def _compiled_model(inputs, setup):
    """The task model and its optimizer, built and compiled under the run's strategy."""
    config, t = inputs.config, inputs.config.training
    with setup.strategy.scope():
        keras.utils.set_random_seed(t.seed)
        model = _initial_model(inputs)
        model.backbone.rematerialize = t.rematerialize
        warning = memory_off_warning(config.task, model.backbone.config.memory_length)
        if warning and setup.is_chief:
            print(f"Warning: {warning}")
        optimizer = build_optimizer(model, **optimizer_arguments(config.optimizer, t))
        model.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                      steps_per_execution=t.steps_per_execution, **compile_arguments(config.task))
    return model, optimizer


def _initial_model(inputs):
    """The task preset to continue from, or a new task model on the (adjusted) backbone preset."""
    t = inputs.config.training
    dtype = None if t.mixed_precision == "float32" else t.mixed_precision
    if inputs.preset.is_task_preset:
        if dtype or inputs.model_overrides:
            raise ConfigError("Continuing from a task preset keeps its dtype, dropout and memory "
                              "settings; drop model.* overrides and training.mixed_precision.")
        return load_task_preset(inputs.preset)
    backbone = XLNetBackbone(inputs.backbone_config, dtype=dtype)
    preset_io.load_weights(backbone, preset_io.fetch(inputs.preset.preset, MODEL_WEIGHTS_FILE))
    model = build_task_model(inputs.config.task, backbone)
    model.build_with_dummy_inputs()
    return model


def _train(model, optimizer, inputs, setup, directory, workdir):
    """`fit` from the resume point to `training.train_steps`; returns the engine's summary."""
    task, t = inputs.config.task, inputs.config.training
    first_step = directory.first_epoch * t.steps_per_epoch
    train = data.finetuning_dataset(task, inputs.tokenizer, "train", setup.global_batch_size, training=True,
                                    seed=t.seed, data_dir=task.data_dir or None)
    if inputs.task_type.score_labels:
        train = train.map(lambda x, y: (x, tf.reshape(y, [-1, 1])))
    if first_step:
        train = train.skip(first_step)
    _build_on_one_batch(model, optimizer, inputs, setup)
    callbacks = _callbacks(inputs, setup, directory, workdir)
    directory.announce_resume(t.steps_per_epoch, t.train_steps, setup.is_chief)
    history = model.fit(train, epochs=t.train_steps // t.steps_per_epoch, steps_per_epoch=t.steps_per_epoch,
                        callbacks=callbacks, verbose=t.verbose if setup.is_chief else 0)
    return setup.summary(history, first_step=first_step, train_steps=t.train_steps)


def _build_on_one_batch(model, optimizer, inputs, setup):
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
        optimizer.build(model.trainable_variables)


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


def _finish(model, inputs, workdir):
    """The final evaluation (eval_results.json) and the final task preset; returns their summary entries."""
    config = inputs.config
    task = config.task
    summary = {}
    if inputs.has_eval:
        results = evaluate(model, task, inputs.tokenizer, config.evaluation.batch_size,
                           data_dir=task.data_dir or None, collapse_warning=config.evaluation.collapse_warning)
        summary["eval"] = results
        if results.get("truncated_examples"):
            print(f"{results['truncated_examples']} of the evaluation examples were longer than "
                  f"task.max_segments x task.sequence_length = {task.max_segments} x {task.sequence_length} "
                  "pieces and were cut to their first pieces (truncated_examples in eval_results.json).")
        atomic_files.write_json(os.path.join(workdir, "eval_results.json"),
                                {"step": config.training.train_steps, **results})
        task = tuned_task(task, results)
        summary.update(inputs.task_type.summary_fields(task))
    final_dir = os.path.join(workdir, FINAL_DIR)
    model.save_to_preset(final_dir, vocabulary_file=inputs.preset.vocabulary, preprocessing=preprocessing_info(task))
    summary["final_dir"] = final_dir
    return summary


def tuned_task(task, results):
    """`task` with what the final evaluation tunes (SQuAD 2.0 with `tune_null_threshold`: the best-F1
    null threshold).

    The final preset's `preprocessing.json` then carries it, where `xlnet-tf export`
    (and so `predict`) reads `null_score_threshold`.
    """
    tuned = task_type(task.task_type).tuned_spec(task, results)
    changes = {k: v for k, v in vars(tuned).items() if v != getattr(task, k)}
    if changes:
        _log.info("The final evaluation tuned %s.", ", ".join(
            f"task.{k} {getattr(task, k)} -> {v}" for k, v in changes.items()))
    return tuned


def preprocessing_info(task):
    """What `preprocessing.json` of a task preset records (how raw text becomes features)."""
    entry = task_type(task.task_type)
    pair = data.has_text_pair(task) if entry.pairs else False
    fields = list(task.text_fields or (["text", "text_pair"] if pair else ["text"]))
    info = {"task_type": entry.name, "sequence_length": task.sequence_length,
            "max_segments": task.max_segments, "lowercase": task.lowercase, "truncate": task.truncate,
            "text_fields": fields[:2] if pair else fields[:1], "has_text_pair": pair,
            "label_names": list(task.label_names) if task.label_names else None,
            "num_classes": task.num_classes, "special_ids": {k: SPECIAL_TOKEN_IDS[k] for k in ("cls", "sep", "pad")},
            "segment_ids": {"a": 0, "b": 1, "cls": 2, "pad": 4}}
    info.update(entry.preprocessing_fields(task, has_question=data.has_question(task)))
    return info


class EvaluationCallback(keras.callbacks.Callback):
    """Evaluates at the end of each epoch and appends an `eval` line to metrics.jsonl."""

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
        _append_jsonl(self.path, {"step": step, "split": "eval", **results})
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in results.items() if isinstance(v, float))
            print(f"eval at step {step}: {shown}")
