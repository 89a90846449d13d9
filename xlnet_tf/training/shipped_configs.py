"""The run configs shipped with the package (`configs/pretrain/*.yaml`, `configs/finetune/*.yaml`) and their names.

`--config` of `xlnet-tf pretrain` / `finetune`, the quick start and `xlnet_tf.resolve_config`
take a YAML path or the name of a shipped config (`base`, `glue_mrpc`, ...);
`resolve_config` turns either into a path. No TensorFlow import for local files,
so the CLI's `--help` stays fast.

Example:
>>> import os
>>> from xlnet_tf.training.shipped_configs import config_names
>>> from xlnet_tf import resolve_config
>>> os.path.basename(resolve_config("tiny", "pretrain"))
'tiny.yaml'
>>> "base" in config_names("pretrain")
True
"""

import os

CONFIG_KINDS = ("pretrain", "finetune")
# A directory is taken for the shipped configs only when it holds this file, so an
# unrelated `configs/` folder next to the package is never picked up.
_MARKER = os.path.join("pretrain", "tiny.yaml")


class UnknownConfigError(ValueError):
    """A `--config` value that is neither an existing file nor a shipped config name."""


def shipped_config_dir():
    """The folder holding the shipped `pretrain/` and `finetune/` configs.

    A wheel carries them as `xlnet_tf/configs/` (setup.py maps the top-level
    `configs/` folder there); a source checkout or an editable install reads the
    top-level `configs/` folder itself.

    Returns:
        The absolute path of the folder, or None when neither exists.
    """
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # xlnet_tf/
    for candidate in (os.path.join(package, "configs"),
                      os.path.join(os.path.dirname(package), "configs")):
        if os.path.isfile(os.path.join(candidate, _MARKER)):
            return candidate
    return None


def config_names(kind):
    """The sorted names (file names without `.yaml`) of the shipped `kind` configs."""
    if kind not in CONFIG_KINDS:
        raise ValueError(f"Config kind must be one of {CONFIG_KINDS}, got {kind!r}.")
    root = shipped_config_dir()
    if root is None:
        return []
    folder = os.path.join(root, kind)
    return sorted(name[:-len(".yaml")] for name in os.listdir(folder) if name.endswith(".yaml"))


def config_description(path):
    """The first line of a YAML file's leading comment, or "" when it has none."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                return stripped.lstrip("#").strip()
            return ""
    return ""


def resolve_config(value, kind):
    """Turns one `--config` value into a YAML path.

    Args:
        value: a path to a YAML file, or the name of a shipped config of `kind`
            (`base`, `glue_mrpc`, `squad_v1.1`, ...).
        kind (str): "pretrain" or "finetune": which shipped configs a name refers to.

    Returns:
        The path of an existing file.

    Raises:
        UnknownConfigError: neither an existing file nor a known name; the
            message lists the known names.

    Example:
    >>> import os
    >>> from xlnet_tf import resolve_config
    >>> os.path.basename(resolve_config("tiny", "pretrain"))
    'tiny.yaml'
    """
    if os.path.isfile(value):
        return value
    if "://" in value:
        import tensorflow as tf  # import time: only gs://, ram://, ... paths need it; `--help` stays light

        if tf.io.gfile.exists(value) and not tf.io.gfile.isdir(value):
            return value
        raise UnknownConfigError(f"Config file not found: {value}")
    names = config_names(kind)
    known = (f"shipped {kind} configs: {', '.join(names)}" if names
             else "no shipped configs were found in this installation")
    looks_like_path = os.sep in value or "/" in value or value.endswith((".yaml", ".yml"))
    if not looks_like_path and value in names:
        return os.path.join(shipped_config_dir(), kind, value + ".yaml")
    if looks_like_path:
        raise UnknownConfigError(f"Config file not found: {value} (give a YAML path, or a name "
                                 f"without a path: {known}).")
    raise UnknownConfigError(f"Unknown config name {value!r} ({known}; or give a path to a YAML "
                             "file).")
