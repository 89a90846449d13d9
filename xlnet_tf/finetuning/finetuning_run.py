"""A whole fine-tuning run: model from a preset, `fit` with resume, evaluation, final task preset.

Work directory layout:
- `config.yaml`: the resolved config (has a `task` section; `training.init_from` is the preset);
- `metrics.jsonl`: training lines (step, loss, learning rate, ...) from the pretraining logger,
  plus one `{"step", "split": "eval", ...metrics}` line per evaluation;
- `backup/`: `keras.callbacks.BackupAndRestore` state; re-running the same command resumes;
- `eval_results.json`: the final evaluation;
- `final/`: the fine-tuned task preset (`config.json`, `task.json`, `task.weights.h5`,
  `spiece.model`, `preprocessing.json`), read by `xlnet-tf export`
  (`xlnet_tf.models.xlnet_task.load_task_preset`).
"""

import dataclasses
import json
import logging
import os

import keras
import yaml

from xlnet_tf.config import ConfigError
from xlnet_tf.finetuning.config import FinetuneConfig, finetune_config_from_dict

_log = logging.getLogger(__name__)
BACKUP_DIR = "backup"
FINAL_DIR = "final"


def build_task_model(task, backbone):
    """The task model of `task.type` on `backbone`."""
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
    from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

    if task.type in ("classification", "regression"):
        if task.type == "classification" and task.num_classes < 2:
            raise ConfigError("task.num_classes must be >= 2 for classification (set it, or "
                              "task.label_names).")
        return XLNetClassifier(backbone, num_classes=task.num_classes, dropout=task.head_dropout)
    if task.type == "span":
        return XLNetSpanLabeler(backbone, start_n_top=task.start_n_top, end_n_top=task.end_n_top,
                                dropout=task.head_dropout)
    if task.type == "multiple_choice":
        return XLNetMultipleChoice(backbone, dropout=task.head_dropout)
    if task.num_classes < 2:
        raise ConfigError("task.num_classes must be >= 2 for token_classification.")
    return XLNetTokenClassifier(backbone, num_classes=task.num_classes, dropout=task.head_dropout)


def compile_arguments(task):
    """`loss`, `loss_weights` and `metrics` for `model.compile`."""
    if task.type == "span":
        sparse = lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # noqa: E731
        # The original objective: mean of start and end cross-entropies + 0.5 x answerability.
        return {"loss": {"start_logits": sparse(), "end_logits": sparse(),
                         "cls_logits": keras.losses.BinaryCrossentropy(from_logits=True)},
                "loss_weights": {"start_logits": 0.5, "end_logits": 0.5, "cls_logits": 0.5}}
    if task.type == "regression":
        return {"loss": keras.losses.MeanSquaredError(), "metrics": [keras.metrics.MeanAbsoluteError()]}
    if task.type == "token_classification":
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100)}
    return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}


def _resolve_vocabulary(init_preset):
    path = os.path.join(init_preset, "spiece.model")
    if not os.path.exists(path):
        raise ConfigError(f"The initial preset {init_preset} has no spiece.model; fine-tuning "
                          "tokenizes text with the preset's vocabulary.")
    return path


def _check_workdir(config, workdir):
    path = os.path.join(workdir, "config.yaml")
    if not os.path.exists(path):
        return
    with open(path) as f:
        previous = yaml.safe_load(f) or {}
    current = config.to_dict()
    ignore = {("training", "verbose")}
    changed = [f"{s}.{k}" for s, section in current.items() if isinstance(section, dict)
               for k, v in section.items()
               if (s, k) not in ignore and previous.get(s, {}).get(k, v) != v]
    if changed:
        raise ConfigError(f"{workdir} holds a run with a different config (changed: "
                          f"{', '.join(changed)}). Use a new --workdir, or the original settings "
                          "to resume.")


def _backup_epoch(backup_dir):
    path = os.path.join(backup_dir, "training_metadata.json")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return int(json.load(f).get("epoch", 0))


def _records_have_eval(task):
    if not task.records_dir or task.type == "span":  # SQuAD scoring needs the passages
        return False
    from xlnet_tf.data.finetuning_records import read_finetuning_manifest

    return (task.eval_split or "validation") in read_finetuning_manifest(task.records_dir)["splits"]


def _append_jsonl(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def run_finetuning(config: FinetuneConfig, workdir: str, *, strategy=None) -> dict:
    """Fine-tunes (or resumes) the run of `config` in `workdir`; returns a summary dict.

    Args:
        config: a `FinetuneConfig`; `training.init_from` names the initial preset
            (a backbone preset, or a task preset to continue from).
        workdir: work directory (created; re-running resumes from `backup/`).
        strategy: a `tf.distribute.Strategy` instead of resolving `config.distribution`.

    Returns:
        `{"eval": {...final metrics...}, "final_dir": path, "train_steps": int, ...}`.
    """
    import tensorflow as tf

    from xlnet_tf.data import finetuning as data
    from xlnet_tf.finetuning.evaluation import evaluate
    from xlnet_tf.finetuning.layerwise_adamw import LayerwiseAdamW, layer_decay_multipliers
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.tokenizer import XLNetTokenizer
    from xlnet_tf.training.callbacks import JsonlMetricsLogger
    from xlnet_tf.training.optimizer import uses_weight_decay
    from xlnet_tf.training.strategy import resolve_batch_sizes, resolve_strategy, task_info
    from xlnet_tf.training.warmup_decay_schedule import WarmupDecaySchedule

    config = finetune_config_from_dict(config.to_dict())
    t, o = config.training, config.optimizer
    init = t.init_from
    if not init:
        raise ConfigError("No initial model: pass --init PRESET_DIR (or set training.init_from).")
    if not os.path.isdir(init):
        raise ConfigError(f"Initial preset directory not found: {init}")
    vocabulary = _resolve_vocabulary(init)
    task = config.task
    if task.type == "classification" and not task.label_names and task.train_file:
        names = data.local_file_label_names(task)
        if names:
            task = dataclasses.replace(task, label_names=names, num_classes=task.num_classes or len(names))
            if task.num_classes != len(names):
                raise ConfigError(f"{task.train_file} has {len(names)} distinct labels {names} but "
                                  f"task.num_classes is {task.num_classes}.")
    if task.records_dir and not (task.train_file or task.dataset):
        from xlnet_tf.data.finetuning_records import read_finetuning_manifest

        recorded = read_finetuning_manifest(task.records_dir)["task"]
        task = dataclasses.replace(
            task, label_names=task.label_names or recorded.get("label_names"),
            num_classes=task.num_classes or int(recorded.get("num_classes") or 0))
    if task.type == "classification" and not task.num_classes:
        raise ConfigError("task.num_classes is not set and cannot be inferred (integer labels): set "
                          "task.num_classes.")
    config = dataclasses.replace(config, task=task)
    _check_workdir(config, workdir)

    if strategy is None:
        strategy = resolve_strategy(config.distribution.strategy,
                                    virtual_cpu_devices=config.distribution.virtual_cpu_devices,
                                    tpu_address=config.distribution.tpu)
    replicas = strategy.num_replicas_in_sync
    global_batch, per_replica = resolve_batch_sizes(
        global_batch_size=t.global_batch_size, per_replica_batch_size_value=t.per_replica_batch_size,
        num_replicas=replicas)
    _, _, is_chief = task_info()
    os.makedirs(workdir, exist_ok=True)
    if is_chief:
        with open(os.path.join(workdir, "config.yaml"), "w") as f:
            f.write(config.to_yaml())
    backup_dir = os.path.join(workdir, BACKUP_DIR)
    first_epoch = _backup_epoch(backup_dir)
    first_step = first_epoch * t.steps_per_epoch
    dtype = None if t.mixed_precision == "float32" else t.mixed_precision
    overrides = {k: v for k, v in dataclasses.asdict(config.model).items() if v is not None}
    with strategy.scope():
        keras.utils.set_random_seed(t.seed)
        if os.path.exists(os.path.join(init, "task.json")):
            from xlnet_tf.models.xlnet_task import load_task_preset

            model = load_task_preset(init)
            if dtype or overrides:
                raise ConfigError("Continuing from a task preset keeps its dtype and dropout; drop "
                                  "model.* overrides and training.mixed_precision.")
        else:
            backbone = XLNetBackbone.from_preset(init, dtype=dtype, **overrides)
            model = build_task_model(task, backbone)
            model.build_with_dummy_inputs()
        model.backbone.rematerialize = t.rematerialize
        schedule = WarmupDecaySchedule(o.learning_rate, warmup_steps=o.warmup_steps,
                                       decay_steps=t.train_steps, end_learning_rate=o.end_learning_rate,
                                       power=o.decay_power)
        optimizer = LayerwiseAdamW(
            learning_rate_multipliers=layer_decay_multipliers(model.backbone, o.layer_decay),
            learning_rate=schedule, weight_decay=float(o.weight_decay), beta_1=o.beta_1,
            beta_2=o.beta_2, epsilon=o.adam_epsilon, global_clipnorm=o.clip_norm or None)
        if o.weight_decay:
            optimizer.exclude_from_weight_decay(
                var_list=[v for v in model.trainable_variables if not uses_weight_decay(v)])
        if t.mixed_precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                      steps_per_execution=t.steps_per_execution, **compile_arguments(task))

    # After `set_random_seed`: seeding clears TensorFlow's kernel cache, which destroys the
    # SentencePiece resource of a tokenizer created earlier.
    tokenizer = XLNetTokenizer(vocabulary, lowercase=task.lowercase)

    train = data.finetuning_dataset(task, tokenizer, "train", global_batch, training=True,
                                    seed=t.seed, data_dir=task.data_dir or None)
    if task.type == "regression":
        train = train.map(lambda x, y: (x, tf.reshape(y, [-1, 1])))
    if first_step:
        train = train.skip(first_step)
    # Build the loss, metrics and optimizer on one real batch: Keras' symbolic build
    # (its fallback inside `fit`) fails for integer-input models under a distribution strategy.
    sample_x, sample_y = next(iter(train))
    with strategy.scope():
        sample_pred = model(sample_x, training=False)
        model.compute_loss(x=sample_x, y=sample_y, y_pred=sample_pred)
        model.compute_metrics(sample_x, sample_y, sample_pred, sample_weight=None)
        model.reset_metrics()
        optimizer.build(model.trainable_variables)

    metrics_path = os.path.join(workdir, "metrics.jsonl")
    callbacks = [keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch",
                                                  delete_checkpoint=False)]
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
    history = model.fit(train, epochs=epochs, steps_per_epoch=t.steps_per_epoch, callbacks=callbacks,
                        verbose=t.verbose if is_chief else 0)
    summary = {"replicas": replicas, "global_batch_size": global_batch,
               "per_replica_batch_size": per_replica, "first_step": first_step,
               "train_steps": t.train_steps,
               "final": {k: float(v[-1]) for k, v in history.history.items() if v}}
    if not is_chief:
        return summary
    if has_eval:
        results = evaluate(model, task, tokenizer, eval_batch, data_dir=task.data_dir or None,
                           collapse_warning=config.evaluation.collapse_warning)
        summary["eval"] = results
        with open(os.path.join(workdir, "eval_results.json"), "w") as f:
            json.dump({"step": t.train_steps, **results}, f, indent=2, sort_keys=True)
    final_dir = os.path.join(workdir, FINAL_DIR)
    model.save_to_preset(final_dir, vocabulary_file=vocabulary, preprocessing=preprocessing_info(task))
    summary["final_dir"] = final_dir
    return summary


def preprocessing_info(task):
    """What `preprocessing.json` of a task preset records (how raw text becomes features)."""
    from xlnet_tf.data.finetuning import has_text_pair

    task_type = task.type
    pair = has_text_pair(task) if task_type in ("classification", "regression") else False
    fields = list(task.text_fields or (["text", "text_pair"] if pair else ["text"]))
    info = {"task_type": task_type, "sequence_length": task.sequence_length,
            "lower_case": task.lowercase, "truncate": task.truncate,
            "text_fields": fields[:2] if pair else fields[:1], "has_text_pair": pair,
            "label_names": list(task.label_names) if task.label_names else None,
            "num_classes": task.num_classes, "special_ids": {"cls": 3, "sep": 4, "pad": 5},
            "segment_ids": {"a": 0, "b": 1, "cls": 2, "pad": 4}}
    if task_type == "span":
        info.update({"max_query_length": task.max_query_length, "doc_stride": task.doc_stride,
                     "max_answer_length": task.max_answer_length,
                     "null_score_threshold": task.null_score_threshold, "version_2": task.version_2,
                     "text_fields": ["context", "question"]})
    if task_type == "multiple_choice":
        info.update({"second_max_length": task.max_qa_length, "truncate": "keep_second",
                     "text_fields": ["context", "question", "options"]})
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
        from xlnet_tf.finetuning.evaluation import evaluate

        results = evaluate(self.model, self.task, self.tokenizer, self.batch_size,
                           data_dir=self.task.data_dir or None, collapse_warning=self.collapse_warning)
        step = (epoch + 1) * self.steps_per_epoch
        _append_jsonl(self.path, {"step": step, "split": "eval", **results})
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in results.items() if isinstance(v, float))
            print(f"eval at step {step}: {shown}")
