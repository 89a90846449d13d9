"""Strict, typed configuration of a pretraining run.

A run config has four sections (`model`, `data`, `optimizer`, `training`) and a
`distribution` section. YAML files are sparse overrides of the defaults below;
`--set section.key=value` overrides are applied last. Unknown keys and wrong
types fail immediately with the dotted name of the key.

Example:
>>> from xlnet_tf.pretraining.pretraining_config import load_run_config
>>> config = load_run_config([], overrides=["training.global_batch_size=16"])
>>> config.training.global_batch_size, config.optimizer.adam_epsilon
(16, 1e-06)
"""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


from xlnet_tf.config_schema import ConfigError, build_section, check_sections
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.data.check_pretraining_sizes import check_pretraining_sizes
from xlnet_tf.training.run_sections import (RunConfigFile, DistributionSection, OptimizerSection,
                                            TrainingSection, validate_training,
                                            without_run_records)
from xlnet_tf.training.config_sources import merge_config_sources, parse_override  # noqa: F401


@dataclasses.dataclass(frozen=True)
class DataSection:
    """Where the pretraining records are and how examples are sampled.

    `sequence_length`, `num_predict`, `perm_size`, `mask_alpha`, `max_span`,
    `whole_word_targets`, `spans_in_reading_order` and `seed` go to
    `xlnet_tf.data.pretraining.pretraining_dataset`; its `reuse_length` and
    `bi_data` come from the `model` section so the two can never disagree.
    `vocabulary` (optional) is the spiece.model the records were made with; its
    size must match `model.vocabulary_size`.
    """

    train_files: str = ""
    vocabulary: str = ""
    sequence_length: int = 512
    num_predict: int = 85
    perm_size: int = 256
    # Spans cover about one word in mask_alpha (the original's flag). Keep it near
    # sequence_length / num_predict: targets the spans leave over are single random tokens.
    mask_alpha: int = 6
    # Longest span in words, drawn with p(n) proportional to 1/n (the original's max_num_tokens, 5).
    max_span: int = 5
    # Only whole spans are predicted (no cut span, no single pieces topped up); num_predict is
    # then a cap. The original: False.
    whole_word_targets: bool = False
    # The tokens of each masked span are predicted in reading order (a word's first piece seeing
    # none of the word), the spans in random order. The original: False, every token order.
    spans_in_reading_order: bool = False
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class RunConfig(RunConfigFile):
    """A whole pretraining run. `model` holds `XLNetConfig` fields."""

    model: XLNetConfig = dataclasses.field(default_factory=XLNetConfig)
    data: DataSection = dataclasses.field(default_factory=DataSection)
    optimizer: OptimizerSection = dataclasses.field(default_factory=OptimizerSection)
    training: TrainingSection = dataclasses.field(default_factory=TrainingSection)
    distribution: DistributionSection = dataclasses.field(default_factory=DistributionSection)

    def validate(self) -> None:
        """Cross-field checks, run when the config is built; raises `ConfigError`."""
        t, d, m = self.training, self.data, self.model
        validate_training(t, self.optimizer)
        if t.gradient_accumulation_steps < 1:
            raise ConfigError(f"training.gradient_accumulation_steps must be >= 1, got "
                              f"{t.gradient_accumulation_steps}.")
        for name in ("sequence_length", "num_predict", "perm_size", "mask_alpha", "max_span"):
            if getattr(d, name) < 1:
                raise ConfigError(f"data.{name} must be >= 1, got {getattr(d, name)}.")
        if not m.reuse_length < d.sequence_length:
            raise ConfigError(f"model.reuse_length ({m.reuse_length}) must be < data.sequence_length "
                              f"({d.sequence_length}).")
        if d.num_predict > d.sequence_length - m.reuse_length:
            raise ConfigError(f"data.num_predict ({d.num_predict}) exceeds the new part of each "
                              f"sequence ({d.sequence_length - m.reuse_length} tokens).")
        # The reader's own rules, here so that a run stops before it writes config.yaml.
        batch_name, batch = ("training.per_replica_batch_size", t.per_replica_batch_size)
        if batch is None:
            batch_name, batch = ("training.global_batch_size", t.global_batch_size)
        try:
            check_pretraining_sizes(
                sequence_length=d.sequence_length, reuse_length=m.reuse_length, num_predict=d.num_predict,
                perm_size=d.perm_size, batch_size=batch, bi_data=m.bi_data,
                names={"sequence_length": "data.sequence_length", "reuse_length": "model.reuse_length",
                       "num_predict": "data.num_predict", "perm_size": "data.perm_size",
                       "batch_size": batch_name, "bi_data": "model.bi_data"})
        except ValueError as e:
            raise ConfigError(str(e)) from None


_SECTIONS = {"data": DataSection, "optimizer": OptimizerSection, "training": TrainingSection,
             "distribution": DistributionSection}


def run_config_from_dict(values: Mapping[str, Any]) -> RunConfig:
    """Builds a validated `RunConfig` from a (possibly sparse) nested dict.

    The sections of a shipped config (`resolve_config("base", "pretrain")`) or of a run's
    own config.yaml; its `devices` record is ignored.

    Example:
    >>> from xlnet_tf import run_config_from_dict
    >>> config = run_config_from_dict({"data": {"train_files": "gs://bucket/records"},
    ...                                "training": {"global_batch_size": 8}})
    >>> config.training.global_batch_size, config.distribution.strategy
    (8, 'auto')
    """
    values = without_run_records(values)  # A run's config.yaml fed back: its records are output.
    check_sections(values, {"model", *_SECTIONS}, "A run config")
    model_values = values.get("model", {}) or {}
    try:
        model = XLNetConfig.from_dict(model_values)
    except ConfigError as e:
        raise ConfigError(f"model: {e}") from e
    except TypeError as e:
        raise ConfigError(f"model: {e}") from e
    sections = {name: build_section(name, cls, values.get(name, {}) or {})
                for name, cls in _SECTIONS.items()}
    return RunConfig(model=model, **sections)


def load_run_config(files: Sequence[str], overrides: Sequence[str] = ()) -> RunConfig:
    """Loads YAML files in order (later files override earlier ones), then `--set` overrides.

    Args:
        files: YAML paths, each a sparse nested mapping.
        overrides: `"section.key=value"` strings, applied last.

    Returns:
        A validated `RunConfig`.
    """
    return run_config_from_dict(merge_config_sources(files, overrides))
