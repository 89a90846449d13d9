"""Strict, typed configuration of a fine-tuning run.

Sections: `task` (what to learn and from which data), `model` (dropout
overrides of the initial preset), `optimizer` (the pretraining optimizer
section plus `layer_decay`), `training` and `distribution` (the sections
both runs share, `xlnet_tf.training.run_sections`) and `evaluation`. YAML files
are sparse overrides of the defaults below, `--set section.key=value` comes
last; unknown keys and wrong types fail with the dotted key name. The
resolved config (dataset defaults filled in) is written to
`WORKDIR/config.yaml`; its `task` section marks a fine-tuning work directory.

Example:
>>> from xlnet_tf.finetuning.finetuning_config import load_finetune_config
>>> config = load_finetune_config([], ["task.dataset=glue/mrpc", "training.global_batch_size=32"])
>>> config.task.task_type, config.task.num_classes, config.task.text_fields
('classification', 2, ['sentence1', 'sentence2'])
"""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


from xlnet_tf.config_schema import ConfigError, build_section, check_sections
from xlnet_tf import tasks
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.data.finetuning_tasks import DATASETS, METRICS, dataset_spec
from xlnet_tf.training.config_sources import merge_config_sources
from xlnet_tf.training.run_sections import (DistributionSection, OptimizerSection, RunConfigFile,
                                            TrainingSection, validate_training,
                                            without_run_records)


@dataclasses.dataclass(frozen=True)
class ModelSection:
    """Overrides of the initial preset's `XLNetConfig`.

    null keeps the preset's dropout; null `memory_length` / `reuse_length` take the
    fine-tuning default 0 (`XLNetConfig.finetuning_adjustments`), an explicit value wins over it.
    `memory_length` > 0 lets the segments of a long document (`task.max_segments`)
    see the earlier ones; `reuse_length` 0 caches whole segments.
    """

    dropout: float | None = None
    attention_dropout: float | None = None
    memory_length: int | None = None
    reuse_length: int | None = None


@dataclasses.dataclass(frozen=True)
class FinetuneOptimizerSection(OptimizerSection):
    """The pretraining optimizer section plus layer-wise learning-rate decay.

    `layer_decay` < 1 multiplies the learning rate of block `i` (of N) by
    `layer_decay ** (N - 1 - i)`; embeddings, relative biases and the head keep
    the full rate (the variables the original code left unscaled). The keys are
    `xlnet_tf.optimizers.build_optimizer`'s arguments, with its defaults (a
    fine-tuning learning rate, 2e-5), so `XLNetTask.compile()` trains as a run does.
    """

    learning_rate: float = 2e-5
    layer_decay: float = 1.0


@dataclasses.dataclass(frozen=True)
class EvaluationSection:
    """When and how the evaluation set is scored."""

    batch_size: int = 32
    every_epoch: bool = True
    collapse_warning: bool = True


@dataclasses.dataclass(frozen=True)
class FinetuneConfig(RunConfigFile):
    """A whole fine-tuning run, checked when built (`RunConfigFile`): its `task` must be resolved.

    Build one with `finetune_config_from_dict` or `load_finetune_config`, which fill the task
    section from its dataset and task type (`resolve_task`) first; `dataclasses.replace` on a
    built config checks the result again.
    """

    task: TaskSpec = dataclasses.field(default_factory=TaskSpec)
    model: ModelSection = dataclasses.field(default_factory=ModelSection)
    optimizer: FinetuneOptimizerSection = dataclasses.field(default_factory=FinetuneOptimizerSection)
    training: TrainingSection = dataclasses.field(default_factory=TrainingSection)
    distribution: DistributionSection = dataclasses.field(default_factory=DistributionSection)
    evaluation: EvaluationSection = dataclasses.field(default_factory=EvaluationSection)

    def validate(self) -> None:
        """Cross-field checks, run when the config is built; raises `ConfigError`."""
        check_task(self.task)
        validate_training(self.training, self.optimizer)
        if self.training.gradient_accumulation_steps != 1:
            raise ConfigError("training.gradient_accumulation_steps is not supported by fine-tuning; "
                              "use a smaller per-replica batch or more replicas.")
        if not 0 < self.optimizer.layer_decay <= 1:
            raise ConfigError(f"optimizer.layer_decay must be in (0, 1], got {self.optimizer.layer_decay}.")
        if self.evaluation.batch_size < 1:
            raise ConfigError("evaluation.batch_size must be >= 1.")
        for key in ("memory_length", "reuse_length"):
            value = getattr(self.model, key)
            if value is not None and value < 0:
                raise ConfigError(f"model.{key} must be >= 0 (or null for the fine-tuning default 0), got {value}.")
        reuse = self.model.reuse_length
        if reuse and reuse > self.task.sequence_length:
            raise ConfigError(f"model.reuse_length ({reuse}) must be <= task.sequence_length "
                              f"({self.task.sequence_length}): it counts positions of one segment.")


# Task types whose examples may span several segments (`task.max_segments` > 1).
LONG_DOCUMENT_TASK_TYPES = tasks.LONG_DOCUMENT_TASK_TYPES

_SECTIONS = {"task": TaskSpec, "model": ModelSection, "optimizer": FinetuneOptimizerSection,
             "training": TrainingSection, "distribution": DistributionSection,
             "evaluation": EvaluationSection}


def finetune_config_from_dict(values: Mapping[str, Any]) -> FinetuneConfig:
    """Builds and validates a `FinetuneConfig` from a sparse nested dict (dataset defaults applied).

    Example:
    >>> from xlnet_tf import finetune_config_from_dict
    >>> config = finetune_config_from_dict({"task": {"dataset": "glue/mrpc"},
    ...                                     "training": {"global_batch_size": 32}})
    >>> config.task.task_type, config.task.num_classes
    ('classification', 2)
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"A fine-tuning config must be a mapping, got {type(values).__name__}.")
    # A run's own config.yaml records where it trained and what it changed in the initial
    # preset; those records are output, not settings, so feeding the file back must not trip on them.
    values = without_run_records(dict(values))
    check_sections(values, _SECTIONS, "A fine-tuning config")
    sections = {name: build_section(name, cls, values.get(name) or {}) for name, cls in _SECTIONS.items()}
    return FinetuneConfig(**{**sections, "task": resolve_task(sections["task"])})


def resolve_task(task: TaskSpec) -> TaskSpec:
    """Fills a task section's empty fields from its TFDS dataset spec and its task type, and checks it.

    What only the data can say (label names of a local file, the number of options)
    is filled at the top of a run (`xlnet_tf.data.finetuning.task_from_data`):
    loading a config reads no data.
    """
    task = _with_dataset_defaults(task) if task.dataset else _with_local_defaults(task)
    entry = _task_type(task)
    task = entry.resolved_spec(task)
    if task.label_names and not task.num_classes:
        task = task.replace(num_classes=len(task.label_names))
    if task.metrics is None:
        task = task.replace(metrics=list(entry.default_metrics(task.num_classes)))
    check_task(task)
    return task


def _task_type(task):
    if task.task_type not in tasks.TASKS:
        raise ConfigError(f"task.task_type must be one of {tasks.TASK_TYPES}, got {task.task_type!r}.")
    return tasks.task_type(task.task_type)


def _with_dataset_defaults(task):
    """`task` with the empty fields its TFDS dataset's spec fills."""
    try:
        spec = dataset_spec(task.dataset)
    except ValueError as e:
        raise ConfigError(f"task.dataset: {e}") from e
    if task.task_type and task.task_type != spec.task_type:
        raise ConfigError(f"task.task_type {task.task_type!r} does not match {task.dataset!r}, a "
                          f"{spec.task_type} dataset.")
    changes = {"task_type": spec.task_type, "train_split": task.train_split or spec.train_split,
               "eval_split": task.eval_split or spec.eval_split}
    if not task.text_fields and spec.text_fields:
        changes["text_fields"] = list(spec.text_fields)
    if not task.label_field:
        changes["label_field"] = spec.label_field
    if not task.num_classes and spec.num_classes:
        changes["num_classes"] = spec.num_classes
    if task.label_names is None and spec.label_names:
        changes["label_names"] = list(spec.label_names)
    if task.metrics is None:
        changes["metrics"] = list(spec.metrics)
    if spec.version_2:
        changes["version_2"] = True
    return task.replace(**changes)


def _with_local_defaults(task):
    """`task` of local files or records: some data is named; the task type defaults to classification."""
    if not (task.train_file or task.eval_file or task.records_dir):
        raise ConfigError("Set task.dataset (a TFDS name, e.g. glue/sst2), task.train_file "
                          "(JSONL/CSV/SQuAD JSON) or task.records_dir (`xlnet-tf prepare-finetuning` "
                          f"output). Known TFDS datasets: {sorted(DATASETS)}.")
    # The common case for local text files.
    return task if task.task_type else task.replace(task_type=tasks.DEFAULT_TASK_TYPE)


def check_task(task: TaskSpec) -> None:
    """Refuses a task section that is not resolved, or whose settings are out of range or of another task type.

    Raises:
        ConfigError: naming the `task.*` key and its value.
    """
    entry = _task_type(task)
    if task.metrics is None:
        raise ConfigError("task.metrics is null: build the config with finetune_config_from_dict or "
                          "load_finetune_config, which fill the task section (resolve_task).")
    if task.label_names and task.num_classes != len(task.label_names):
        raise ConfigError(f"task.num_classes ({task.num_classes}) != len(task.label_names) "
                          f"({len(task.label_names)}).")
    bad = [m for m in task.metrics if m not in METRICS]
    if bad:
        raise ConfigError(f"task.metrics: unknown metric(s) {bad}; known: {list(METRICS)}.")
    if task.sequence_length < 4:
        raise ConfigError(f"task.sequence_length must be >= 4, got {task.sequence_length}.")
    try:
        entry.check_spec(task)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    if not 0 <= task.head_dropout < 1:
        raise ConfigError(f"task.head_dropout must be in [0, 1), got {task.head_dropout}.")
    if task.max_segments < 1:
        raise ConfigError(f"task.max_segments must be >= 1, got {task.max_segments}.")
    if task.max_segments > 1 and not entry.long_documents:
        raise ConfigError(f"task.max_segments > 1 (got {task.max_segments}) is only for the task types "
                          f"{list(LONG_DOCUMENT_TASK_TYPES)}, not {task.task_type!r} (span tasks use "
                          "task.doc_stride windows instead).")


def load_finetune_config(files: Sequence[str], overrides: Sequence[str] = ()) -> FinetuneConfig:
    """Loads YAML files in order, then `section.key=value` overrides; returns the resolved config."""
    return finetune_config_from_dict(merge_config_sources(files, overrides))
