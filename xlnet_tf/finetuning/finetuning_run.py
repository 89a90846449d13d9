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

The strategy, batch split, work directory checks, run lock, config.yaml and backup choice are
the training engine's (`xlnet_tf.training.run_setup`, `xlnet_tf.training.run_directory`), the
same as pretraining's.
"""

import contextlib
import dataclasses
import json
import logging
import os

import keras
import tensorflow as tf
import yaml

from xlnet_tf import tasks
from xlnet_tf.formats import preset_files
from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig, finetune_config_from_dict, memory_off_warning
from xlnet_tf.storage import atomic_files
from xlnet_tf.tasks import task_type
from xlnet_tf.training.run_directory import check_workdir, open_run_directory
from xlnet_tf.storage import preset_io
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_task import finetuning_adjustments
from xlnet_tf.data.finetuning_record_dataset import read_finetuning_manifest
from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.training.callbacks import JsonlMetricsLogger
from xlnet_tf.training.run_setup import RunSetup
from xlnet_tf.models.xlnet_task import load_task_preset
from xlnet_tf.data.finetuning import has_text_pair
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


def _exists(path):
    # Through gfile: the preset and work directory may be on gs:// or ram://.
    return tf.io.gfile.exists(path)


def _resolve_vocabulary(init_preset):
    # `spiece.model`, else keras-hub's `assets/tokenizer/vocabulary.spm`.
    path = preset_io.vocabulary_path(init_preset, required=False) if _exists(init_preset) else None
    if path is None:
        raise ConfigError(f"The initial preset {init_preset} has no spiece.model; fine-tuning "
                          "tokenizes text with the preset's vocabulary.")
    return path


def _init_adjustments(init, explicit):
    """`{field: {"preset", "finetune"}}`: a (pretraining) backbone preset's settings that
    fine-tuning changes (`finetuning_adjustments`); fields in `explicit` (the user's
    `model.*` overrides) are left to them. Empty for a task preset."""
    if _exists(os.path.join(init, preset_files.TASK_CONFIG_FILE)):
        return {}
    preset_config = XLNetConfig.from_json(os.path.join(init, preset_files.CONFIG_FILE))
    return {k: {"preset": old, "finetune": new}
            for k, (old, new) in finetuning_adjustments(preset_config, keep=explicit).items()}


def _adjustments_yaml(init_adjustments):
    """The `init_adjustments` section of config.yaml ("" when nothing changed)."""
    if not init_adjustments:
        return ""
    return yaml.safe_dump({"init_adjustments": init_adjustments}, sort_keys=False)


def _records_have_eval(task):
    if not task.records_dir or task_type(task.task_type).evaluation == tasks.SQUAD:  # needs the passages
        return False
    return (task.eval_split or "validation") in read_finetuning_manifest(task.records_dir)["splits"]


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
        strategy: a `tf.distribute.Strategy` instead of resolving `config.distribution`.

    Returns:
        `{"eval": {...final metrics...}, "final_dir": path, "train_steps": int, ...}`.

    Example:
    >>> # skip-example: downloads GLUE MRPC from TensorFlow Datasets; tests/notebooks runs this call on the CPU
    >>> config = finetune_config_from_dict({
    ...     "task": {"dataset": "glue/mrpc"},
    ...     "training": {"init_from": "runs/base/export/preset", "global_batch_size": 32}})
    >>> summary = run_finetuning(config, "runs/mrpc")  # doctest: +SKIP
    >>> summary["final_dir"]  # doctest: +SKIP
    'runs/mrpc/final'
    """
    with contextlib.ExitStack() as run_scope:
        return _run_finetuning(config, workdir, run_scope, strategy=strategy)


def _run_finetuning(config, workdir, run_scope, *, strategy):
    """`run_finetuning`; `run_scope` (an ExitStack) releases the run lock when the run ends."""
    config = finetune_config_from_dict(config.to_dict())
    t = config.training
    init = t.init_from
    if not init:
        raise ConfigError("No initial model: pass --init PRESET_DIR (or set training.init_from).")
    if not tf.io.gfile.isdir(init):
        raise ConfigError(f"Initial preset directory not found: {init}")
    vocabulary = _resolve_vocabulary(init)
    task = config.task
    entry = task_type(task.task_type)
    if entry.label_names_from_file and not task.label_names and task.train_file:
        try:
            names = data.local_file_label_names(task)
        except (ValueError, FileNotFoundError) as e:
            raise ConfigError(f"task.train_file: {e}") from e
        if names:
            task = dataclasses.replace(task, label_names=names, num_classes=task.num_classes or len(names))
            if task.num_classes != len(names):
                raise ConfigError(f"{task.train_file} has {len(names)} distinct labels {names} but "
                                  f"task.num_classes is {task.num_classes}.")
    if entry.layout == tasks.CHOICES and not task.num_classes and task.train_file:
        try:
            task = dataclasses.replace(task, num_classes=data.local_file_num_choices(task))
        except (ValueError, FileNotFoundError) as e:
            raise ConfigError(f"task.train_file: {e}") from e
    if task.records_dir and not (task.train_file or task.dataset):
        recorded = read_finetuning_manifest(task.records_dir)["task"]
        task = dataclasses.replace(
            task, label_names=task.label_names or recorded.get("label_names"),
            num_classes=task.num_classes or int(recorded.get("num_classes") or 0))
    if entry.min_classes and entry.layout == tasks.TEXT and not task.num_classes:
        raise ConfigError("task.num_classes is not set and cannot be inferred (integer labels): set "
                          "task.num_classes.")
    try:
        # Both local files in full (fields, labels), before anything is written or trained.
        data.check_local_files(task)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    config = dataclasses.replace(config, task=task)
    check_workdir(config.to_dict(), workdir)

    setup = RunSetup.resolve(
        config.distribution, t, strategy,
        paths={"task.train_file": task.train_file, "task.eval_file": task.eval_file,
               "task.records_dir": task.records_dir, "task.data_dir": task.data_dir,
               "workdir": workdir})
    setup.announce()
    strategy, is_chief = setup.strategy, setup.is_chief
    global_batch = setup.global_batch_size
    overrides = {k: v for k, v in dataclasses.asdict(config.model).items() if v is not None}
    init_adjustments = _init_adjustments(init, overrides)
    # Before the first write: a second run on this work directory stops here, naming this one.
    directory = open_run_directory(workdir, config.to_yaml() + setup.devices_yaml()
                                   + _adjustments_yaml(init_adjustments),
                                   run_scope, is_chief=is_chief, task_id=setup.task_id)
    if is_chief and init_adjustments:
        changes = ", ".join(f"{k} {json.dumps(v['preset'])} -> {json.dumps(v['finetune'])}"
                            for k, v in init_adjustments.items())
        print(f"Fine-tuning settings for {init}: {changes} (recorded as init_adjustments in "
              "config.yaml).")
    first_step = directory.first_epoch * t.steps_per_epoch
    dtype = None if t.mixed_precision == "float32" else t.mixed_precision
    with strategy.scope():
        keras.utils.set_random_seed(t.seed)
        if _exists(os.path.join(init, preset_files.TASK_CONFIG_FILE)):
            model = load_task_preset(init)
            if dtype or overrides:
                raise ConfigError("Continuing from a task preset keeps its dtype, dropout and memory "
                                  "settings; drop model.* overrides and training.mixed_precision.")
        else:
            adjusted = {k: v["finetune"] for k, v in init_adjustments.items()}
            backbone = XLNetBackbone.from_preset(init, dtype=dtype, **overrides, **adjusted)
            model = build_task_model(task, backbone)
            model.build_with_dummy_inputs()
        model.backbone.rematerialize = t.rematerialize
        warning = memory_off_warning(task, model.backbone.config.memory_length)
        if warning and is_chief:
            print(f"Warning: {warning}")
        optimizer = build_optimizer(model, **optimizer_arguments(config.optimizer, t))
        model.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                      steps_per_execution=t.steps_per_execution, **compile_arguments(task))

    tokenizer = XLNetTokenizer(vocabulary, lowercase=task.lowercase)

    train = data.finetuning_dataset(task, tokenizer, "train", global_batch, training=True,
                                    seed=t.seed, data_dir=task.data_dir or None)
    if entry.score_labels:
        train = train.map(lambda x, y: (x, tf.reshape(y, [-1, 1])))
    if first_step:
        train = train.skip(first_step)
    # Build the loss, metrics and optimizer on one real batch: Keras' symbolic build
    # (its fallback inside `fit`) fails for integer-input models under a distribution strategy.
    # Never from `train`: its iterators share one shuffle-seed generator, so one opened here
    # (reading ahead past a pass after `skip`) would reorder what `fit` trains on.
    sample_x, sample_y = data.sample_batch(task, tokenizer, global_batch,
                                           data_dir=task.data_dir or None)
    if entry.score_labels:
        sample_y = tf.reshape(sample_y, [-1, 1])  # [B] -> [B, 1]
    with strategy.scope():
        sample_pred = model(sample_x, training=False)
        model.compute_loss(x=sample_x, y=sample_y, y_pred=sample_pred)
        model.compute_metrics(sample_x, sample_y, sample_pred, sample_weight=None)
        model.reset_metrics()
        optimizer.build(model.trainable_variables)

    metrics_path = os.path.join(workdir, "metrics.jsonl")
    callbacks = [directory.backup_callback()]
    has_eval = bool(task.eval_file or task.dataset) or _records_have_eval(task)
    eval_batch = config.evaluation.batch_size
    if is_chief:
        callbacks.append(JsonlMetricsLogger(metrics_path, steps_per_epoch=t.steps_per_epoch,
                                            every_steps=t.log_every_steps,
                                            global_batch_size=global_batch))
        if has_eval and config.evaluation.every_epoch:
            callbacks.append(EvaluationCallback(task, tokenizer, eval_batch, metrics_path,
                                                 t.steps_per_epoch, config.evaluation.collapse_warning,
                                                 verbose=t.verbose))
    epochs = t.train_steps // t.steps_per_epoch
    directory.announce_resume(t.steps_per_epoch, t.train_steps, is_chief)
    history = model.fit(train, epochs=epochs, steps_per_epoch=t.steps_per_epoch, callbacks=callbacks,
                        verbose=t.verbose if is_chief else 0)
    summary = setup.summary(history, first_step=first_step, train_steps=t.train_steps)
    if not is_chief:
        return summary
    if has_eval:
        results = evaluate(model, task, tokenizer, eval_batch, data_dir=task.data_dir or None,
                           collapse_warning=config.evaluation.collapse_warning)
        summary["eval"] = results
        if results.get("truncated_examples"):
            print(f"{results['truncated_examples']} of the evaluation examples were longer than "
                  f"task.max_segments x task.sequence_length = {task.max_segments} x {task.sequence_length} "
                  "pieces and were cut to their first pieces (truncated_examples in eval_results.json).")
        atomic_files.write_json(os.path.join(workdir, "eval_results.json"),
                                {"step": t.train_steps, **results})
        task = tuned_task(task, results)
        if entry.evaluation == tasks.SQUAD:
            summary["null_score_threshold"] = task.null_score_threshold
    final_dir = os.path.join(workdir, FINAL_DIR)
    model.save_to_preset(final_dir, vocabulary_file=vocabulary, preprocessing=preprocessing_info(task))
    summary["final_dir"] = final_dir
    return summary


def tuned_task(task, results):
    """`task` with the evaluation's best-F1 null threshold (SQuAD 2.0 with `tune_null_threshold`).

    The final preset's `preprocessing.json` then carries it, where `xlnet-tf export`
    (and so `predict`) reads `null_score_threshold`.
    """
    if (task_type(task.task_type).evaluation == tasks.SQUAD and task.version_2 and task.tune_null_threshold
            and results.get("best_f1_thresh") is not None):
        threshold = float(results["best_f1_thresh"])
        _log.info("SQuAD 2.0: null_score_threshold %s -> %s (best F1 %.2f on the evaluation set).",
                  task.null_score_threshold, threshold, results.get("best_f1", float("nan")))
        return dataclasses.replace(task, null_score_threshold=threshold)
    return task


def preprocessing_info(task):
    """What `preprocessing.json` of a task preset records (how raw text becomes features)."""
    entry = task_type(task.task_type)
    pair = has_text_pair(task) if entry.pairs else False
    fields = list(task.text_fields or (["text", "text_pair"] if pair else ["text"]))
    info = {"task_type": entry.name, "sequence_length": task.sequence_length,
            "max_segments": task.max_segments, "lowercase": task.lowercase, "truncate": task.truncate,
            "text_fields": fields[:2] if pair else fields[:1], "has_text_pair": pair,
            "label_names": list(task.label_names) if task.label_names else None,
            "num_classes": task.num_classes, "special_ids": {k: SPECIAL_TOKEN_IDS[k] for k in ("cls", "sep", "pad")},
            "segment_ids": {"a": 0, "b": 1, "cls": 2, "pad": 4}}
    if entry.layout == tasks.WINDOWS:
        info.update({"max_query_length": task.max_query_length, "doc_stride": task.doc_stride,
                     "max_answer_length": task.max_answer_length,
                     "null_score_threshold": task.null_score_threshold, "version_2": task.version_2,
                     "text_fields": ["context", "question"]})
    if entry.layout == tasks.CHOICES:
        info.update({"second_max_length": task.max_qa_length, "truncate": entry.truncate,
                     "text_fields": ["context", "question", "options"], "has_question": data.has_question(task)})
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
