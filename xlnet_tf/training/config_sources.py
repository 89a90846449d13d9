"""Run config sources: sparse YAML files in order, then `--set section.key=value` overrides.

Both runs load their config through `merge_config_sources` and then check the merged
dict with their own schema (`xlnet_tf.pretraining.pretraining_config`,
`xlnet_tf.finetuning.finetuning_config`). No TensorFlow import for local files.

Example:
>>> from xlnet_tf.training.config_sources import merge_config_sources
>>> merge_config_sources([], ["training.train_steps=10", "optimizer.learning_rate=1e-3"])
{'training': {'train_steps': 10}, 'optimizer': {'learning_rate': '1e-3'}}
"""

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
import tensorflow as tf

from xlnet_tf.config_schema import ConfigError


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
    """A config file's text: local paths with `open`, others through `tf.io.gfile`."""
    path = str(path)
    if "://" not in path:
        with open(path) as f:
            return f.read()
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
