"""Typed, strictly validated configuration for XLNet models.

`XLNetConfig` is a frozen dataclass of plain values: it reads no file. Every
constructor path (keyword arguments, `from_dict`, YAML overrides) validates types
and ranges and names the offending field in the error, so a typo in a config file
fails before any weight is built. A preset's config comes from the preset reader
(`xlnet_tf.storage.preset_io.read_backbone_config`), an original or Hugging Face
checkpoint's from `xlnet_tf.convert.checkpoint_config`.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from xlnet_tf.config_schema import ConfigError, check_fields  # noqa: F401 (ConfigError: re-exported)

ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "tanh", "swish")
ATTENTION_TYPES = ("bi", "uni")


@dataclasses.dataclass(frozen=True)
class XLNetConfig:
    """Hyperparameters of an XLNet network.

    Args:
        vocabulary_size: number of SentencePiece pieces (32000 for the released models).
        num_layers: number of XLNet blocks.
        num_heads: attention heads per block.
        head_dim: size of each head.
        hidden_dim: model width (`d_model`).
        intermediate_dim: width of the feed-forward layer (`d_inner`).
        activation: feed-forward activation. `"gelu"` is the exact (erf) GELU used by
            Hugging Face; `"gelu_approximate"` is the tanh form of the original TF1 code.
        dropout: dropout on embeddings, attention output and feed-forward.
        attention_dropout: dropout on attention probabilities.
        untie_relative_bias: one set of `r_w`/`r_r`/`r_s` biases per layer when True,
            one shared set when False.
        memory_length: number of cached positions per layer (0 disables recurrence).
        reuse_length: positions of each segment cached for the next (0 = all of them).
        clamp_length: clamp relative distances to +-clamp_length (-1 = no clamping).
        bi_data: forward positions for the first half of each batch, backward for the second.
        same_length: every query sees the same number of keys (uni attention).
        attention_type: "bi" (bidirectional, XLNet pretraining) or "uni" (causal, Transformer-XL).
        layer_norm_epsilon: epsilon of the post-LN layer norms (1e-12 in the released models).
        initializer_range: stddev of the normal initializer.

    Example:
    >>> from xlnet_tf import XLNetConfig
    >>> config = XLNetConfig(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                      head_dim=4, hidden_dim=8, intermediate_dim=16)
    >>> config.replace(memory_length=8).memory_length
    8
    """

    vocabulary_size: int = 32000
    num_layers: int = 12
    num_heads: int = 12
    head_dim: int = 64
    hidden_dim: int = 768
    intermediate_dim: int = 3072
    activation: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    untie_relative_bias: bool = True
    memory_length: int = 0
    reuse_length: int = 0
    clamp_length: int = -1
    bi_data: bool = False
    same_length: bool = False
    attention_type: str = "bi"
    layer_norm_epsilon: float = 1e-12
    initializer_range: float = 0.02

    def __post_init__(self):
        check_fields("XLNetConfig", self)
        positive = ("vocabulary_size", "num_layers", "num_heads", "head_dim",
                    "hidden_dim", "intermediate_dim")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"XLNetConfig.{name} must be > 0, got {getattr(self, name)}.")
        for name in ("memory_length", "reuse_length"):
            if getattr(self, name) < 0:
                raise ConfigError(f"XLNetConfig.{name} must be >= 0, got {getattr(self, name)}.")
        if self.clamp_length < -1 or self.clamp_length == 0:
            raise ConfigError(
                f"XLNetConfig.clamp_length must be -1 (off) or > 0, got {self.clamp_length}.")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"XLNetConfig.{name} must be in [0, 1), got {getattr(self, name)}.")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(
                f"XLNetConfig.activation must be one of {ACTIVATIONS}, got {self.activation!r}.")
        if self.attention_type not in ATTENTION_TYPES:
            raise ConfigError(f"XLNetConfig.attention_type must be one of {ATTENTION_TYPES}, "
                              f"got {self.attention_type!r}.")
        if self.layer_norm_epsilon <= 0 or self.initializer_range <= 0:
            raise ConfigError("XLNetConfig.layer_norm_epsilon and initializer_range must be > 0.")

    def replace(self, **changes) -> "XLNetConfig":
        """Returns a copy with `changes` applied (validated like the constructor)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"Unknown XLNetConfig field(s): {sorted(unknown)}.")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    # The settings of permutation-LM pretraining that a task model cannot use, and their
    # fine-tuning values: `bi_data` needs an even batch and only serves pretraining, and a
    # single window needs no recurrence memory (the original fine-tuning code ran with
    # `mem_len` 0 too). `attention_type`, `clamp_length` and `same_length` are kept.
    FINETUNING_SETTINGS = {"bi_data": False, "memory_length": 0, "reuse_length": 0}

    def finetuning_adjustments(self, keep=()) -> dict:
        """The changes that turn this (pretraining) configuration into a fine-tuning one.

        Long documents (`[B, S, L]` features, `xlnet_tf.models.segment_recurrence`) read
        their earlier segments through recurrence memory: a caller that sets
        `memory_length` / `reuse_length` itself lists them in `keep`.

        Args:
            keep: field names the caller sets itself (e.g. a user's explicit override),
                left out of the result.

        Returns:
            `{field: (this config's value, the fine-tuning value)}` for every field that changes.

        Example:
        >>> from xlnet_tf import XLNetConfig
        >>> XLNetConfig(memory_length=32, reuse_length=16).finetuning_adjustments(keep={"memory_length"})
        {'reuse_length': (16, 0)}
        """
        return {field: (getattr(self, field), value) for field, value in self.FINETUNING_SETTINGS.items()
                if field not in keep and getattr(self, field) != value}

    def for_finetuning(self, overrides=None) -> tuple["XLNetConfig", dict]:
        """This (pretraining) configuration as fine-tuning builds it, and what that changed.

        Args:
            overrides: the user's settings (a fine-tuning config's `model.*` keys that are
                set); they win over `finetuning_adjustments`.

        Returns:
            The config with `overrides` and the adjustments applied, and the adjustments as
            `{field: {"preset": old, "finetune": new}}` (recorded in a run's config.yaml).

        Example:
        >>> from xlnet_tf import XLNetConfig
        >>> config, adjustments = XLNetConfig(memory_length=32).for_finetuning({"dropout": 0.0})
        >>> config.memory_length, config.dropout, adjustments
        (0, 0.0, {'memory_length': {'preset': 32, 'finetune': 0}})
        """
        overrides = dict(overrides or {})
        adjustments = {field: {"preset": old, "finetune": new}
                       for field, (old, new) in self.finetuning_adjustments(keep=overrides).items()}
        return self.replace(**overrides, **{k: v["finetune"] for k, v in adjustments.items()}), adjustments

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "XLNetConfig":
        """Builds a config from our own field names; unknown keys are an error."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"XLNetConfig expects a mapping, got {type(values).__name__}.")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"Unknown XLNetConfig key(s): {unknown}. Known keys: {sorted(names)}.")
        return cls(**dict(values))
