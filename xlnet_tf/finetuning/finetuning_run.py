"""A whole fine-tuning run: its inputs resolved at the top, `fit` with resume, the final evaluation and preset.

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

The run reads as a table of contents. What it reads before its first write (the task completed from
its data, the initial preset's vocabulary and config) is resolved once, at the top, by
`FinetuningInputs` and handed down as plain values: nothing below reads the config's files again.
The strategy, batch split, work directory checks, run lock, config.yaml and backup choice are the
training engine's (`xlnet_tf.training.run_setup`), the same as pretraining's. The task model and
its `fit` are `xlnet_tf.finetuning.finetuning_fit`'s; the run ends here (`finish_run`) with the
final evaluation (`xlnet_tf.finetuning.evaluation`) and the final task preset.
"""

import contextlib
import dataclasses
import functools
import json
import logging
import os

import yaml

from xlnet_tf import tasks
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.data import finetuning as data
from xlnet_tf.data.finetuning_record_dataset import records_manifest
from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig
from xlnet_tf.finetuning.finetuning_fit import finetuning_model
from xlnet_tf.finetuning.finetuning_fit import fit_task_model
from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io
from xlnet_tf.training.run_setup import open_run_directory
from xlnet_tf.training.run_setup import start_run

_log = logging.getLogger(__name__)
FINAL_DIR = "final"


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
    config, task = inputs.config, inputs.config.task
    with contextlib.ExitStack() as run_scope:  # releases the run lock when the run ends
        setup = start_run(config, workdir, run_scope, strategy,
                          paths={"task.train_file": task.train_file, "task.eval_file": task.eval_file,
                                 "task.records_dir": task.records_dir, "task.data_dir": task.data_dir,
                                 "workdir": workdir}, model_config=inputs.backbone_config)
        record = config.to_yaml() + setup.devices_yaml()
        if inputs.init_adjustments:
            record += yaml.safe_dump({"init_adjustments": inputs.init_adjustments}, sort_keys=False)
        # Before the first write: a second run on this work directory stops here, naming this one.
        directory = open_run_directory(workdir, record, run_scope, is_chief=setup.is_chief, task_id=setup.task_id,
                                       steps=(config.training.steps_per_epoch, config.training.train_steps))
        for notice in inputs.notices if setup.is_chief else ():
            print(notice)
        model = finetuning_model(inputs, setup)
        summary = fit_task_model(model, inputs, setup, directory, workdir)
        if setup.is_chief:
            summary.update(finish_run(model, inputs, workdir))
        return summary


@dataclasses.dataclass(frozen=True)
class FinetuningInputs:
    """A fine-tuning run's resolved inputs.

    Attributes:
        config: the validated `FinetuneConfig`, its task completed from the data (`task_from_data`).
        task_type: the task's `TaskType`.
        preset: the initial preset's `PresetContents`, read once here: its vocabulary, its task
            model if it is a task preset (training continues from its head), its backbone config.
        tokenizer: the `XLNetTokenizer` of its vocabulary, with the task's `lowercase`, built on
            first use: its TensorFlow ops would fix the devices, so it comes after the run's
            strategy has set up virtual CPU devices.
        backbone_config: the backbone preset's `XLNetConfig` with the user's `model.*` settings and the adjustments
            (None for a task preset, which keeps its own).
        init_adjustments: `{field: {"preset", "finetune"}}`, the backbone preset's settings that
            fine-tuning changes (empty for a task preset).
        has_eval: the task has an evaluation set.
        notices: what the run's chief prints when it starts: the settings fine-tuning changed
            in the preset (`init_adjustments`), and a long-document task without memory.

    Example:
    >>> # skip-example: reads the initial preset that `config.training.init_from` names
    >>> from xlnet_tf.finetuning.finetuning_run import FinetuningInputs
    >>> inputs = FinetuningInputs.resolve(config)
    >>> inputs.config.task.num_classes
    2
    """

    config: FinetuneConfig
    task_type: tasks.TaskType
    preset: preset_io.PresetContents
    backbone_config: XLNetConfig | None
    init_adjustments: dict
    has_eval: bool
    notices: tuple = ()

    @functools.cached_property
    def tokenizer(self) -> XLNetTokenizer:
        return XLNetTokenizer(self.preset.vocabulary, lowercase=self.config.task.lowercase)

    @classmethod
    def resolve(cls, config: FinetuneConfig) -> "FinetuningInputs":
        """Checks the initial preset against `config` and completes the task from its data.

        `config` is valid as built (`FinetuneConfig`), so it is taken as it is.

        Raises:
            ConfigError: no initial preset, one without a vocabulary, a task its data contradicts, or
                a task preset of another task model (or with `model.*` overrides or mixed precision).
        """
        init = config.training.init_from
        if not init:
            raise ConfigError("No initial model: pass --init PRESET_DIR (or set training.init_from).")
        if not atomic_files.gfile(init).isdir(init):
            raise ConfigError(f"Initial preset directory not found: {init}")
        preset = preset_io.read_preset(init)
        if preset.vocabulary is None:
            raise ConfigError(f"The initial preset {init} has no spiece.model; fine-tuning "
                              "tokenizes text with the preset's vocabulary.")
        entry = tasks.task_type(config.task.task_type)
        manifest = records_manifest(config.task, entry)
        task = data.task_from_data(config.task, entry, manifest)
        overrides = {k: v for k, v in dataclasses.asdict(config.model).items() if v is not None}
        if preset.is_task_preset and (overrides or config.training.mixed_precision != "float32"):
            raise ConfigError("Continuing from a task preset keeps its dtype, dropout and memory "
                              "settings; drop model.* overrides and training.mixed_precision.")
        saved_class, model_class = (preset.task_config or {}).get("class_name"), entry.model_class().__name__
        if preset.is_task_preset and saved_class != model_class:
            raise ConfigError(f"{preset.task_file} holds a {saved_class}, not the {model_class} of task type "
                              f"{entry.name}: continue from a preset of this task type, or from a backbone preset.")
        preset_config = XLNetConfig.from_dict(preset.backbone_config)
        backbone_config, adjustments = (None, {}) if preset.is_task_preset else preset_config.for_finetuning(
            overrides)
        records_have_eval = bool(manifest) and entry.evaluates_records() and (
            (task.eval_split or "validation") in manifest["splits"])
        changes = ", ".join(f"{k} {json.dumps(v['preset'])} -> {json.dumps(v['finetune'])}"
                            for k, v in adjustments.items())
        notices = ((f"Fine-tuning settings for {init}: {changes} (recorded as init_adjustments in config.yaml)."
                    if changes else None),
                   memory_off_warning(task, (backbone_config or preset_config).memory_length))
        notices = tuple(notice for notice in notices if notice)
        return cls(config=dataclasses.replace(config, task=task), task_type=entry, preset=preset,
                   backbone_config=backbone_config, init_adjustments=adjustments,
                   has_eval=bool(task.eval_file or task.dataset) or records_have_eval,
                   notices=notices)


def memory_off_warning(task, memory_length):
    """The one-line warning of a long-document task without recurrence memory, or None.

    Args:
        task: a resolved `TaskSpec`.
        memory_length: the task model's backbone `memory_length`.

    Example:
    >>> from xlnet_tf.finetuning.finetuning_run import memory_off_warning
    >>> from xlnet_tf.tasks.task_spec import TaskSpec
    >>> memory_off_warning(TaskSpec(task_type="classification", train_file="t.jsonl"), 0) is None
    True
    """
    if task.max_segments > 1 and not memory_length:
        return (f"Warning: task.max_segments is {task.max_segments} but the backbone's memory_length is 0: the "
                "segments will not see each other (only the last one decides); set model.memory_length "
                "to let them.")
    return None


def finish_run(model, inputs, workdir):
    """The final evaluation (`eval_results.json`) and the final task preset (`final/`), written by the chief.

    Args:
        model: the run's trained task model.
        inputs: the run's `FinetuningInputs`.
        workdir: the work directory.

    Returns:
        The run summary's entries: `eval` (the final metrics, with an evaluation set),
        `final_dir`, and what the task type reports of its tuned task (`summary_fields`).

    Example:
    >>> # skip-example: evaluates and saves the model a run trained in `workdir`
    >>> from xlnet_tf.finetuning.finetuning_run import finish_run
    >>> finish_run(model, inputs, "runs/mrpc")["final_dir"]
    'runs/mrpc/final'
    """
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
    tuned = tasks.task_type(task.task_type).tuned_spec(task, results)
    changes = {k: v for k, v in vars(tuned).items() if v != getattr(task, k)}
    if changes:
        _log.info("The final evaluation tuned %s.", ", ".join(
            f"task.{k} {getattr(task, k)} -> {v}" for k, v in changes.items()))
    return tuned


def preprocessing_info(task):
    """What `preprocessing.json` of a task preset records (how raw text becomes features)."""
    entry = tasks.task_type(task.task_type)
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
