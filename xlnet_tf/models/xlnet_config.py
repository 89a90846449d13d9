"""Typed, strictly validated configuration for XLNet models.

`XLNetConfig` is a frozen dataclass. Every constructor path (keyword
arguments, `from_dict`, `from_json`, YAML overrides) validates types and
ranges and names the offending field in the error, so a typo in a config file
fails before any weight is built.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any


from xlnet_tf.config_schema import ConfigError, check_value  # noqa: F401 (ConfigError: re-exported)
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io

ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "tanh", "swish")
ATTENTION_TYPES = ("bi", "uni")

# Network-shape keys that the original `xlnet_config.json` and Hugging Face's
# `config.json` both use (Hugging Face kept the original names) -> our names.
_SHARED_FOREIGN_KEYS = {
    "n_layer": "num_layers",
    "n_head": "num_heads",
    "d_head": "head_dim",
    "d_model": "hidden_dim",
    "d_inner": "intermediate_dim",
    "ff_activation": "activation",
    "untie_r": "untie_relative_bias",
}
# Keys of the original `xlnet_config.json` (zihangdai/xlnet) -> our names.
_ORIGINAL_KEYS = {"n_token": "vocabulary_size", **_SHARED_FOREIGN_KEYS}
# Keys of a Hugging Face `XLNetConfig.to_json_file()` -> our names.
_HF_KEYS = {
    "vocab_size": "vocabulary_size",
    **_SHARED_FOREIGN_KEYS,
    "mem_len": "memory_length",
    "reuse_len": "reuse_length",
    "clamp_len": "clamp_length",
    "attn_type": "attention_type",
    "layer_norm_eps": "layer_norm_epsilon",
    "dropout": "dropout",
    "bi_data": "bi_data",
    "same_length": "same_length",
    "initializer_range": "initializer_range",
}
# Keys that those files carry and that do not describe the network.
_IGNORED_FOREIGN_KEYS = {
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
    "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout",
    "start_n_top", "end_n_top", "pad_token_id", "bos_token_id", "eos_token_id",
    "use_mems_eval", "use_mems_train", "task_specific_params", "id2label", "label2id",
    "problem_type", "finetuning_task", "output_past", "_name_or_path", "tie_word_embeddings",
    "return_dict", "output_hidden_states", "output_attentions", "chunk_size_feed_forward",
    "is_decoder", "is_encoder_decoder", "add_cross_attention", "tokenizer_class",
    "use_cache", "n_token_", "num_labels",
}


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
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            # Checked only: an int is a fine float, and the frozen dataclass keeps it as given.
            check_value(f"XLNetConfig.{field.name}", value, field.type, parse_strings=False)
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

    @classmethod
    def from_json(cls, path: str) -> "XLNetConfig":
        """Reads a preset's `config.json`, an original `xlnet_config.json` or a Hugging Face `config.json`.

        A preset's `config.json` is keras-hub's serialized `XLNetBackbone`
        (`{"module", "class_name", "config": {"config": {...}}, "registered_name"}`);
        a plain `XLNetConfig` dict is read too.

        The format is detected from the keys. Original and Hugging Face files are
        translated field by field; keys that describe nothing in the network
        (task heads, token ids) are ignored, any other unknown key is an error.
        """
        try:
            values = atomic_files.read_json(path, kind="Config")  # Local, gs:// and ram:// alike.
        except (FileNotFoundError, ValueError) as e:
            raise ConfigError(str(e)) from e
        if isinstance(values, Mapping) and "registered_name" in values:
            # A keras-hub preset's config.json: the serialized XLNetBackbone.
            inner = values.get("config")
            if not isinstance(inner, Mapping) or not isinstance(inner.get("config"), Mapping):
                raise ConfigError(f"{path} holds a serialized {values.get('class_name')!r} "
                                  f"({values.get('registered_name')}), not an XLNetBackbone with an XLNetConfig.")
            values = inner["config"]
        try:
            return cls.from_any_dict(values)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from e

    @classmethod
    def from_any_dict(cls, values: Mapping[str, Any]) -> "XLNetConfig":
        """Like `from_json` for an already parsed dict."""
        names = {f.name for f in dataclasses.fields(cls)}
        if set(values) <= names:
            return cls.from_dict(values)
        if "vocab_size" in values or "model_type" in values:
            mapping = _HF_KEYS
        elif "n_token" in values or "d_model" in values:
            mapping = _ORIGINAL_KEYS
        else:
            return cls.from_dict(values)  # Raises naming the unknown keys.
        translated = {}
        unknown = []
        for key, value in values.items():
            if key in mapping:
                translated[mapping[key]] = value
            elif key in names:
                translated[key] = value
            elif key not in _IGNORED_FOREIGN_KEYS:
                unknown.append(key)
        if unknown:
            raise ConfigError(f"Unknown XLNet config key(s): {sorted(unknown)}.")
        if mapping is _ORIGINAL_KEYS:
            # The original code's "gelu" is the tanh approximation; keep outputs identical.
            if translated.get("activation") == "gelu":
                translated["activation"] = "gelu_approximate"
            # Released models use eps 1e-12 and no dropout settings in the file.
            translated.setdefault("layer_norm_epsilon", 1e-12)
        else:
            if translated.get("activation") in ("gelu_new", "gelu_pytorch_tanh"):
                translated["activation"] = "gelu_approximate"
            if translated.get("memory_length") is None:
                translated["memory_length"] = 0
            if translated.get("reuse_length") is None:
                translated["reuse_length"] = 0
            if translated.get("clamp_length", -1) in (None, 0) or translated.get("clamp_length", -1) < 0:
                translated["clamp_length"] = -1
            if "dropout" in translated:
                translated.setdefault("attention_dropout", translated["dropout"])
        return cls.from_dict(translated)


def read_backbone_config(preset):
    """The `XLNetConfig` of a preset's `config.json` (keras-hub's layout: a serialized `XLNetBackbone`).

    Args:
        preset: a preset directory (local, `gs://`, `ram://`) or a `hf://` / `kaggle://` handle.

    Returns:
        The validated `XLNetConfig`.

    Example:
    >>> read_backbone_config("/tmp/xlnet_tiny").num_layers  # doctest: +SKIP
    2
    """
    return XLNetConfig.from_any_dict(preset_io.backbone_config_dict(preset_io.read_config_json(preset),
                                                                    f"{preset}/{preset_io.CONFIG_FILE}"))
