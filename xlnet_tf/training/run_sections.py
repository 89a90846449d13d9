"""The config sections both runs share: `optimizer`, `training`, `distribution`, and their checks.

`xlnet_tf.pretraining.pretraining_config.RunConfig` and
`xlnet_tf.finetuning.finetuning_config.FinetuneConfig` hold these same
sections (fine-tuning extends the optimizer section), so a key means the same
in both runs and is checked by the same code. No TensorFlow import.

Example:
>>> from xlnet_tf.training.run_sections import OptimizerSection, TrainingSection, validate_training
>>> training = TrainingSection(global_batch_size=8, train_steps=10, steps_per_epoch=5)
>>> validate_training(training, OptimizerSection(warmup_steps=2))
>>> validate_training(TrainingSection(global_batch_size=8, train_steps=10, steps_per_epoch=4),
...                   OptimizerSection(warmup_steps=2))
Traceback (most recent call last):
...
xlnet_tf.config_schema.ConfigError: training.train_steps (10) must be a multiple of training.steps_per_epoch (4).
"""

import dataclasses
import math
import typing
from collections.abc import Mapping

import yaml

from xlnet_tf.config_schema import ConfigError, check_fields

MIXED_PRECISION = ("float32", "mixed_bfloat16", "mixed_float16")

# Sections a run appends to its config.yaml as a record, not as settings: where it trained
# (`devices`: strategy class, replicas, device kind) and what fine-tuning changed in its initial
# preset (`init_adjustments`). Feeding that file back through --config ignores them, and a
# resume compares only the settings, so a run may resume on other devices.
RUN_RECORD_SECTIONS = ("devices", "init_adjustments")


def without_run_records(values):
    """`values` (a parsed run config) without the `RUN_RECORD_SECTIONS`; anything else as is.

    Example:
    >>> from xlnet_tf.training.run_sections import without_run_records
    >>> without_run_records({"training": {"seed": 1}, "devices": {"replicas": 8}})
    {'training': {'seed': 1}}
    """
    if not isinstance(values, Mapping):
        return values
    return {k: v for k, v in values.items() if k not in RUN_RECORD_SECTIONS}


class RunConfigFile:
    """A whole run config (a dataclass of sections): valid from the moment it is built, written as config.yaml holds it.

    The constructor, and so `dataclasses.replace`, checks every section's type and every value
    against its annotation (`check_fields`, naming the dotted key), then the run's cross-field
    rules (`validate`). A run therefore takes the config it is given as it is: there is no
    config object that a run would have to check again.
    """

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for section in dataclasses.fields(self):
            values, section_type = getattr(self, section.name), hints[section.name]
            if not isinstance(values, section_type):
                raise ConfigError(f"Section {section.name!r} must be a {section_type.__name__}, "
                                  f"got {type(values).__name__}.")
            check_fields(section.name, values)
        self.validate()

    def validate(self) -> None:
        """The run's cross-field rules; raises `ConfigError` naming the key."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# `optimizer.algorithm`: AdamW everywhere, or Muon's step on the blocks' weight matrices.
OPTIMIZER_ALGORITHMS = ("adamw", "muon")


@dataclasses.dataclass(frozen=True)
class OptimizerSection:
    """AdamW with linear warmup then linear (power 1) or polynomial decay.

    `algorithm: muon` gives the blocks' weight matrices Muon's orthogonalised
    step instead of Adam's (`xlnet_tf.optimizers.build_optimizer`).
    """

    algorithm: str = "adamw"
    learning_rate: float = 1e-4
    warmup_steps: int = 100
    end_learning_rate: float = 0.0
    decay_power: float = 1.0
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    beta_1: float = 0.9
    beta_2: float = 0.999
    clip_norm: float = 1.0


@dataclasses.dataclass(frozen=True)
class TrainingSection:
    """Steps, batch sizes, precision and checkpointing.

    An "epoch" here is a checkpoint period of `steps_per_epoch` optimizer steps
    over an endless record stream: metrics reset, the backup for resuming is
    written and a checkpoint is kept at the end of each one.
    """

    global_batch_size: int | None = None
    per_replica_batch_size: int | None = None
    train_steps: int = 1000
    steps_per_epoch: int = 100
    steps_per_execution: int = 1
    log_every_steps: int = 10
    mixed_precision: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    rematerialize: bool = False
    reset_memory_each_epoch: bool = False
    keep_checkpoints: int = 3
    seed: int = 0
    init_from: str = ""
    verbose: int = 1


@dataclasses.dataclass(frozen=True)
class DistributionSection:
    """Where the run trains: a `tf.distribute` strategy on TensorFlow (`xlnet_tf.training.strategy`), a
    `keras.distribution` on JAX (`xlnet_tf.training.jax_distribution`).

    `model_parallel` is the number of devices along the `model` axis of the
    `model_parallel` strategy's `(batch, model)` mesh (JAX); 0 takes half the devices.
    """

    strategy: str = "auto"
    virtual_cpu_devices: int = 0
    tpu: str = ""
    model_parallel: int = 0


def validate_optimizer(optimizer, section: str = "optimizer") -> None:
    """Range checks shared by pretraining and fine-tuning; raises `ConfigError` naming the key.

    A learning rate must be a positive finite number (a negative one ascends the
    loss, NaN poisons the weights); the other values get the ranges AdamW and
    the schedule accept.
    """
    def bad(key, rule):
        value = getattr(optimizer, key)
        return ConfigError(f"{section}.{key} must be {rule}, got {value!r}.")

    def finite(key):
        return math.isfinite(getattr(optimizer, key))

    if optimizer.algorithm not in OPTIMIZER_ALGORITHMS:
        raise bad("algorithm", f"one of {OPTIMIZER_ALGORITHMS}")
    if not (finite("learning_rate") and optimizer.learning_rate > 0):
        raise bad("learning_rate", "a positive finite number (e.g. 1e-4)")
    if not (finite("end_learning_rate") and optimizer.end_learning_rate >= 0):
        raise bad("end_learning_rate", "a finite number >= 0")
    if optimizer.warmup_steps < 0:
        raise bad("warmup_steps", ">= 0")
    if not (finite("decay_power") and optimizer.decay_power > 0):
        raise bad("decay_power", "a positive finite number")
    if not (finite("weight_decay") and optimizer.weight_decay >= 0):
        raise bad("weight_decay", "a finite number >= 0")
    if not (finite("adam_epsilon") and optimizer.adam_epsilon > 0):
        raise bad("adam_epsilon", "a positive finite number")
    for key in ("beta_1", "beta_2"):
        if not (finite(key) and 0 <= getattr(optimizer, key) < 1):
            raise bad(key, "in [0, 1)")
    if not (finite("clip_norm") and optimizer.clip_norm >= 0):
        raise bad("clip_norm", "a finite number >= 0 (0 = no clipping)")


def validate_training(training: TrainingSection, optimizer: OptimizerSection) -> None:
    """Checks of the `training` section (and its warmup against it) that both runs make.

    Step counts are at least 1 and fit into each other (a backup ends every
    epoch, an epoch is whole executions); one of the two batch sizes is set;
    the warmup fits into the run; then `validate_optimizer`. How many
    `gradient_accumulation_steps` a run accepts is the run's own check.

    Raises:
        ConfigError: naming the key and its value.
    """
    t = training
    if t.mixed_precision not in MIXED_PRECISION:
        raise ConfigError(f"training.mixed_precision must be one of {MIXED_PRECISION}, "
                          f"got {t.mixed_precision!r}.")
    for name in ("train_steps", "steps_per_epoch", "steps_per_execution", "log_every_steps"):
        if getattr(t, name) < 1:
            raise ConfigError(f"training.{name} must be >= 1, got {getattr(t, name)}.")
    if t.train_steps % t.steps_per_epoch:
        raise ConfigError(f"training.train_steps ({t.train_steps}) must be a multiple of "
                          f"training.steps_per_epoch ({t.steps_per_epoch}).")
    if t.steps_per_epoch % t.steps_per_execution:
        raise ConfigError(f"training.steps_per_epoch ({t.steps_per_epoch}) must be a multiple "
                          f"of training.steps_per_execution ({t.steps_per_execution}).")
    if t.global_batch_size is None and t.per_replica_batch_size is None:
        raise ConfigError("Set training.global_batch_size or training.per_replica_batch_size.")
    if optimizer.warmup_steps > t.train_steps:
        raise ConfigError(f"optimizer.warmup_steps ({optimizer.warmup_steps}) exceeds "
                          f"training.train_steps ({t.train_steps}).")
    validate_optimizer(optimizer)


def optimizer_arguments(optimizer: OptimizerSection, training: TrainingSection) -> dict:
    """The `xlnet_tf.optimizers.build_optimizer` arguments of a run's config, key for key.

    Every key of the `optimizer` section keeps its name, `training.train_steps` and
    `training.gradient_accumulation_steps` too; `loss_scaling` follows from
    `training.mixed_precision` (mixed_float16 needs it). `XLNetTask.compile` takes
    the same arguments, so `classifier.compile(**optimizer_arguments(...))` trains
    as `xlnet-tf finetune` does.

    Example:
    >>> from xlnet_tf.training.run_sections import OptimizerSection, TrainingSection, optimizer_arguments
    >>> arguments = optimizer_arguments(OptimizerSection(learning_rate=3e-5), TrainingSection(train_steps=500))
    >>> arguments["learning_rate"], arguments["train_steps"], arguments["loss_scaling"]
    (3e-05, 500, False)
    """
    return {**dataclasses.asdict(optimizer), "train_steps": training.train_steps,
            "gradient_accumulation_steps": training.gradient_accumulation_steps,
            "loss_scaling": training.mixed_precision == "mixed_float16"}
