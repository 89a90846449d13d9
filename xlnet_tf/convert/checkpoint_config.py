"""The `XLNetConfig` of a checkpoint's config file: the original `xlnet_config.json` or Hugging Face's `config.json`.

The format is detected from the keys. Original and Hugging Face files are translated
field by field; keys that describe nothing in the network (task heads, token ids) are
ignored, any other unknown key is an error. A file of our own field names is read as it is.

Example:
>>> from xlnet_tf.convert.checkpoint_config import read_checkpoint_config
>>> read_checkpoint_config("xlnet_cased_L-12_H-768_A-12/xlnet_config.json").num_layers  # doctest: +SKIP
12
"""

from collections.abc import Mapping

from xlnet_tf.models.xlnet_config import ConfigError, XLNetConfig
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io

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


def read_checkpoint_config(path):
    """The `XLNetConfig` of the config file at `path` (local, `gs://`, `ram://`).

    A preset's `config.json` (a serialized `XLNetBackbone`) is read too.

    Raises:
        ConfigError: the file is missing, not JSON, or holds keys that are not an XLNet config's.
    """
    try:
        values = atomic_files.read_json(path, kind="Config")
    except (FileNotFoundError, ValueError) as e:
        raise ConfigError(str(e)) from e
    try:
        if preset_io.is_keras_hub_layout(values):
            return XLNetConfig.from_dict(preset_io.backbone_config_dict(values, str(path)))
        return checkpoint_config(values)
    except (ConfigError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from e


def checkpoint_config(values):
    """The `XLNetConfig` of a parsed checkpoint config (original, Hugging Face or our own field names)."""
    if not isinstance(values, Mapping):
        return XLNetConfig.from_dict(values)  # Raises naming the type.
    names = set(XLNetConfig.__dataclass_fields__)
    if set(values) <= names:
        return XLNetConfig.from_dict(values)
    if "vocab_size" in values or "model_type" in values:
        mapping = _HF_KEYS
    elif "n_token" in values or "d_model" in values:
        mapping = _ORIGINAL_KEYS
    else:
        return XLNetConfig.from_dict(values)  # Raises naming the unknown keys.
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
    return XLNetConfig.from_dict(translated)
