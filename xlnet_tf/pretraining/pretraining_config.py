"""Strict, typed configuration of a pretraining run.

A run config has four sections (`model`, `data`, `optimizer`, `training`) and a
`distribution` section. YAML files are sparse overrides of the defaults below;
`--set section.key=value` overrides are applied last. Unknown keys and wrong
types fail immediately with the dotted name of the key.

Example:
>>> config = load_run_config([], overrides=["training.global_batch_size=16"])
>>> config.training.global_batch_size, config.optimizer.adam_epsilon
(16, 1e-06)
"""

import dataclasses
import math
import re
import typing
from typing import Any, Mapping, Optional, Sequence

import yaml

from xlnet_tf.models.xlnet_config import ConfigError, XLNetConfig
from xlnet_tf.data.pretraining_sizes import check_pretraining_sizes

MIXED_PRECISION = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class DataSection:
    """Where the pretraining records are and how examples are sampled.

    `seq_length`, `num_predict`, `perm_size` and `seed` go to
    `xlnet_tf.data.pretraining.pretraining_dataset`; its `reuse_length` and
    `bi_data` come from the `model` section so the two can never disagree.
    `vocabulary` (optional) is the spiece.model the records were made with; its
    size must match `model.vocabulary_size`.
    """

    train_files: str = ""
    vocabulary: str = ""
    seq_length: int = 512
    num_predict: int = 85
    perm_size: int = 256
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class OptimizerSection:
    """AdamW with linear warmup then linear (power 1) or polynomial decay."""

    learning_rate: float = 1e-4
    warmup_steps: int = 100
    end_learning_rate: float = 0.0
    decay_power: float = 1.0
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    beta_1: float = 0.9
    beta_2: float = 0.999
    clip_norm: float = 1.0


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


@dataclasses.dataclass(frozen=True)
class TrainingSection:
    """Steps, batch sizes, precision and checkpointing.

    An "epoch" here is a checkpoint period of `steps_per_epoch` optimizer steps
    over an endless record stream: metrics reset, the backup for resuming is
    written and a checkpoint is kept at the end of each one.
    """

    global_batch_size: Optional[int] = None
    per_replica_batch_size: Optional[int] = None
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
    """Which `tf.distribute` strategy to use (see `xlnet_tf.training.strategy`)."""

    strategy: str = "auto"
    virtual_cpu_devices: int = 0
    tpu: str = ""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A whole pretraining run. `model` holds `XLNetConfig` fields."""

    model: XLNetConfig = dataclasses.field(default_factory=XLNetConfig)
    data: DataSection = dataclasses.field(default_factory=DataSection)
    optimizer: OptimizerSection = dataclasses.field(default_factory=OptimizerSection)
    training: TrainingSection = dataclasses.field(default_factory=TrainingSection)
    distribution: DistributionSection = dataclasses.field(default_factory=DistributionSection)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def validate(self) -> "RunConfig":
        """Cross-field checks; returns self or raises `ConfigError`."""
        t, d, m = self.training, self.data, self.model
        if t.mixed_precision not in MIXED_PRECISION:
            raise ConfigError(f"training.mixed_precision must be one of {MIXED_PRECISION}, "
                              f"got {t.mixed_precision!r}.")
        for name in ("train_steps", "steps_per_epoch", "steps_per_execution", "log_every_steps",
                     "gradient_accumulation_steps"):
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
        for name in ("seq_length", "num_predict", "perm_size"):
            if getattr(d, name) < 1:
                raise ConfigError(f"data.{name} must be >= 1, got {getattr(d, name)}.")
        if not m.reuse_length < d.seq_length:
            raise ConfigError(f"model.reuse_length ({m.reuse_length}) must be < data.seq_length "
                              f"({d.seq_length}).")
        if d.num_predict > d.seq_length - m.reuse_length:
            raise ConfigError(f"data.num_predict ({d.num_predict}) exceeds the new part of each "
                              f"sequence ({d.seq_length - m.reuse_length} tokens).")
        if self.optimizer.warmup_steps > t.train_steps:
            raise ConfigError(f"optimizer.warmup_steps ({self.optimizer.warmup_steps}) exceeds "
                              f"training.train_steps ({t.train_steps}).")
        validate_optimizer(self.optimizer)
        # The reader's own rules, here so that a run stops before it writes config.yaml.
        batch_name, batch = ("training.per_replica_batch_size", t.per_replica_batch_size)
        if batch is None:
            batch_name, batch = ("training.global_batch_size", t.global_batch_size)
        try:
            check_pretraining_sizes(
                seq_length=d.seq_length, reuse_length=m.reuse_length, num_predict=d.num_predict,
                perm_size=d.perm_size, batch_size=batch, bi_data=m.bi_data,
                names={"seq_length": "data.seq_length", "reuse_length": "model.reuse_length",
                       "num_predict": "data.num_predict", "perm_size": "data.perm_size",
                       "batch_size": batch_name, "bi_data": "model.bi_data"})
        except ValueError as e:
            raise ConfigError(str(e)) from None
        return self


_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")

_SECTIONS = {"data": DataSection, "optimizer": OptimizerSection, "training": TrainingSection,
             "distribution": DistributionSection}


def _check_value(dotted: str, value: Any, annotation) -> Any:
    """Returns `value` if it has the annotated type (ints pass as floats), else raises."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = True, args[0]
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{dotted} must be {annotation.__name__}, got null.")
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
        return float(value)  # YAML 1.1 reads "1e-4" (no dot) as a string.
    if annotation is int and isinstance(value, bool):
        raise ConfigError(f"{dotted} must be int, got bool {value!r}.")
    if not isinstance(value, annotation):
        raise ConfigError(f"{dotted} must be {annotation.__name__}, got "
                          f"{type(value).__name__} {value!r}.")
    return value


def _build_section(name: str, cls, values: Mapping[str, Any]):
    if not isinstance(values, Mapping):
        raise ConfigError(f"Section {name!r} must be a mapping, got {type(values).__name__}.")
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ConfigError(f"Unknown key(s) {[f'{name}.{k}' for k in unknown]}; known keys of "
                          f"{name!r}: {sorted(hints)}.")
    checked = {k: _check_value(f"{name}.{k}", v, hints[k]) for k, v in values.items()}
    return cls(**checked)


def run_config_from_dict(values: Mapping[str, Any]) -> RunConfig:
    """Builds a validated `RunConfig` from a (possibly sparse) nested dict."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"A run config must be a mapping, got {type(values).__name__}.")
    known = {"model", *_SECTIONS}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"Unknown section(s) {unknown}; known sections: {sorted(known)}.")
    model_values = values.get("model", {}) or {}
    try:
        model = XLNetConfig.from_dict(model_values)
    except ConfigError as e:
        raise ConfigError(f"model: {e}") from e
    except TypeError as e:
        raise ConfigError(f"model: {e}") from e
    sections = {name: _build_section(name, cls, values.get(name, {}) or {})
                for name, cls in _SECTIONS.items()}
    return RunConfig(model=model, **sections).validate()


def _merge(base: dict, override: Mapping[str, Any], where: str) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value, where)
        else:
            merged[key] = value
    return merged


def parse_override(text: str) -> dict:
    """Turns `"a.b=value"` into `{"a": {"b": value}}`; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"--set expects key=value, got {text!r}.")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--set key must look like section.key, got {key!r}.")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {e}") from e
    return {parts[0]: {parts[1]: value}}


def _read_text(path) -> str:
    """A config file's text: local paths with `open` (no TensorFlow import), others through `tf.io.gfile`."""
    path = str(path)
    if "://" not in path:
        with open(path) as f:
            return f.read()
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(path)
    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def merge_config_sources(files: Sequence[str], overrides: Sequence[str] = ()) -> dict:
    """Merges sparse YAML files in order, then `section.key=value` overrides, into one nested dict."""
    merged: dict = {}
    for path in files:
        try:
            values = yaml.safe_load(_read_text(path)) or {}
        except FileNotFoundError as e:
            raise ConfigError(f"Config file not found: {path}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"{path} is not valid YAML: {e}") from e
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path}: top level must be a mapping of sections.")
        merged = _merge(merged, values, path)
    for text in overrides:
        merged = _merge(merged, parse_override(text), text)
    return merged


def load_run_config(files: Sequence[str], overrides: Sequence[str] = ()) -> RunConfig:
    """Loads YAML files in order (later files override earlier ones), then `--set` overrides.

    Args:
        files: YAML paths, each a sparse nested mapping.
        overrides: `"section.key=value"` strings, applied last.

    Returns:
        A validated `RunConfig`.
    """
    return run_config_from_dict(merge_config_sources(files, overrides))
