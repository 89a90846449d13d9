"""`FinetuningInputs`: what a fine-tuning run reads before it writes anything, resolved once.

The run's config, its task completed from the data, the initial preset's vocabulary and the
settings fine-tuning changes in it are read here, at the top of `run_finetuning`, and handed
down as plain values: nothing below reads the config's files again.
"""

import dataclasses
import functools

import tensorflow as tf

from xlnet_tf import tasks
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.data import finetuning as data
from xlnet_tf.data.finetuning_record_dataset import read_finetuning_manifest
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig, finetune_config_from_dict
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_task import finetuning_adjustments
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.storage import preset_io
from xlnet_tf.tasks.task_spec import TaskSpec


def task_from_data(task: TaskSpec, entry: tasks.TaskType, manifest: dict | None) -> TaskSpec:
    """`task` completed from its data: the label names and class count its files or records give, checked.

    `entry` is the task's `TaskType`. A local file's string labels name the classes (task
    types with `label_names_from_file`), a multiple-choice file's options count them, and
    records alone give what their manifest recorded (`manifest`, the parsed manifest of
    `task.records_dir`, read by the caller: `records_manifest`); then both local files are
    read in full, so a bad row fails before anything is written or trained.

    Raises:
        ConfigError: a file cannot be read, its labels disagree with the config, or a
            class count the task type needs is still unknown.

    Example:
    >>> # skip-example: reads the training file that `config.task` names
    >>> from xlnet_tf.finetuning.finetuning_inputs import records_manifest, task_from_data, tasks
    >>> entry = tasks.task_type(config.task.task_type)
    >>> task = task_from_data(config.task, entry, records_manifest(config.task, entry))
    >>> task.label_names
    ['negative', 'positive']
    """
    try:
        label_names = None if task.label_names else data.local_file_label_names(task)
        num_choices = 0 if task.num_classes else data.local_file_num_choices(task)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(f"task.train_file: {e}") from e
    recorded = manifest["task"] if manifest and not (task.train_file or task.dataset) else None
    try:
        task = entry.with_data_classes(task, label_names, num_choices, recorded)
        data.check_local_files(task)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    return task


def _init_adjustments(preset_config, explicit):
    """`{field: {"preset", "finetune"}}`: the settings of a (pretraining) backbone preset's
    `XLNetConfig` that fine-tuning changes (`finetuning_adjustments`); fields in `explicit`
    (the user's `model.*` overrides) are left to them."""
    return {k: {"preset": old, "finetune": new}
            for k, (old, new) in finetuning_adjustments(preset_config, keep=explicit).items()}


def _initial_backbone_config(preset_config, overrides):
    """The backbone preset's `XLNetConfig` as fine-tuning builds it, and the adjustments made to it."""
    adjustments = _init_adjustments(preset_config, overrides)
    return preset_config.replace(**overrides, **{k: v["finetune"] for k, v in adjustments.items()}), adjustments


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
        model_overrides: the user's `model.*` settings (those left null keep the preset's).
        backbone_config: the backbone preset's `XLNetConfig` with the overrides and adjustments
            (None for a task preset, which keeps its own).
        init_adjustments: `{field: {"preset", "finetune"}}`, the backbone preset's settings that
            fine-tuning changes (empty for a task preset).
        has_eval: the task has an evaluation set.

    Example:
    >>> # skip-example: reads the initial preset that `config.training.init_from` names
    >>> from xlnet_tf.finetuning.finetuning_inputs import FinetuningInputs
    >>> inputs = FinetuningInputs.resolve(config)
    >>> inputs.config.task.num_classes
    2
    """

    config: FinetuneConfig
    task_type: tasks.TaskType
    preset: preset_io.PresetContents
    model_overrides: dict
    backbone_config: XLNetConfig | None
    init_adjustments: dict
    has_eval: bool

    @functools.cached_property
    def tokenizer(self) -> XLNetTokenizer:
        return XLNetTokenizer(self.preset.vocabulary, lowercase=self.config.task.lowercase)

    @classmethod
    def resolve(cls, config: FinetuneConfig) -> "FinetuningInputs":
        """Validates `config` again, checks the initial preset and completes the task from its data.

        Raises:
            ConfigError: no initial preset, one without a vocabulary, or a task its data contradicts.
        """
        config = finetune_config_from_dict(config.to_dict())
        init = config.training.init_from
        if not init:
            raise ConfigError("No initial model: pass --init PRESET_DIR (or set training.init_from).")
        if not tf.io.gfile.isdir(init):
            raise ConfigError(f"Initial preset directory not found: {init}")
        preset = preset_io.read_preset(init)
        if preset.vocabulary is None:
            raise ConfigError(f"The initial preset {init} has no spiece.model; fine-tuning "
                              "tokenizes text with the preset's vocabulary.")
        entry = tasks.task_type(config.task.task_type)
        manifest = records_manifest(config.task, entry)
        task = task_from_data(config.task, entry, manifest)
        overrides = {k: v for k, v in dataclasses.asdict(config.model).items() if v is not None}
        backbone_config, adjustments = (None, {}) if preset.is_task_preset else _initial_backbone_config(
            XLNetConfig.from_dict(preset.backbone_config), overrides)
        records_have_eval = bool(manifest) and entry.evaluates_records() and (
            (task.eval_split or "validation") in manifest["splits"])
        return cls(config=dataclasses.replace(config, task=task), task_type=entry, preset=preset,
                   model_overrides=overrides, backbone_config=backbone_config, init_adjustments=adjustments,
                   has_eval=bool(task.eval_file or task.dataset) or records_have_eval)


def records_manifest(task: TaskSpec, entry: tasks.TaskType) -> dict | None:
    """The manifest of `task.records_dir` where the run needs it, read once; None otherwise.

    A run reads it when the records are its only training data (what they were written
    for), or when they may be its evaluation data: no other evaluation set is named and
    its task type scores records (whether they hold the evaluation split).
    """
    records_train = not (task.train_file or task.dataset)
    records_eval = not (task.eval_file or task.dataset) and entry.evaluates_records()
    if not task.records_dir or not (records_train or records_eval):
        return None
    return read_finetuning_manifest(task.records_dir)
