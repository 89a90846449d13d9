"""`FinetuningInputs`: what a fine-tuning run reads before it writes anything, resolved once.

The run's config, its task completed from the data, the initial preset's vocabulary and the
settings fine-tuning changes in it are read here, at the top of `run_finetuning`, and handed
down as plain values: nothing below reads the config's files again.
"""

import dataclasses
import functools
import json

import tensorflow as tf

from xlnet_tf import tasks
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.data.finetuning import task_from_data
from xlnet_tf.data.finetuning_record_dataset import records_manifest
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.storage import preset_io


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
    >>> from xlnet_tf.finetuning.finetuning_inputs import FinetuningInputs
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
    >>> from xlnet_tf.finetuning.finetuning_inputs import memory_off_warning
    >>> from xlnet_tf.tasks.task_spec import TaskSpec
    >>> memory_off_warning(TaskSpec(task_type="classification", train_file="t.jsonl"), 0) is None
    True
    """
    if task.max_segments > 1 and not memory_length:
        return (f"Warning: task.max_segments is {task.max_segments} but the backbone's memory_length is 0: the "
                "segments will not see each other (only the last one decides); set model.memory_length "
                "to let them.")
    return None
