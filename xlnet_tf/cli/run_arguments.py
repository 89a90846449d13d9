"""Command-line options shared by `xlnet-tf pretrain` and `xlnet-tf finetune`.

Each option is a shorthand for a `--set section.key=value` override, so the
resolved config in the work directory records it like any other setting.
`--config` takes a YAML path or the name of a shipped config (`base`,
`glue_mrpc`, ...; `xlnet-tf configs` lists them). No TensorFlow import here:
`--help` stays fast.
"""

import os
import sys

from xlnet_tf.training.strategy import STRATEGIES as STRATEGY_CHOICES
from xlnet_tf.config_schema import ConfigError

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
        kind: "pretrain" or "finetune": which shipped configs a name refers to.

    Returns:
        The path of an existing file.

    Raises:
        UnknownConfigError: neither an existing file nor a known name; the
            message lists the known names.

    Example:
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


def add_run_arguments(parser, config_help, kind):
    """Adds --config, --workdir, --set, --strategy, --tpu, --virtual-cpu-devices and --print-config.

    Args:
        parser: an `argparse.ArgumentParser`.
        config_help: help text for `--config`.
        kind: "pretrain" or "finetune": the shipped configs `--config NAME` picks from.
    """
    names = ", ".join(config_names(kind)) or "none found"
    parser.add_argument("--config", action="append", default=[], metavar="NAME_OR_FILE",
                        help=f"{config_help}: a YAML path or a shipped config name ({names}); "
                             "repeatable, later ones override earlier ones")
    parser.add_argument("--workdir", help="work directory (created; reused to resume); required "
                                          "unless --print-config")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        dest="overrides", help="override one config value (YAML syntax)")
    parser.add_argument("--strategy", choices=STRATEGY_CHOICES,
                        help="same as --set distribution.strategy=...")
    parser.add_argument("--tpu", metavar="NAME", help=(
        "the TPU to connect to: a TPU Node's or a pod slice's name, or grpc://IP:8470 (data and "
        "--workdir then on gs://); default: TPU_NAME, else this TPU VM's chips ('local')"))
    parser.add_argument("--virtual-cpu-devices", type=int, metavar="N",
                        help="split the CPU into N logical devices (try distribution on a laptop)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config (every key --set accepts) and exit")


def config_files(args, kind):
    """The YAML paths of `args.config` (see `resolve_config`); raises `UnknownConfigError`."""
    return [resolve_config(value, kind) for value in args.config]


def check_workdir(args, parser):
    """`--workdir` is required unless only the config is printed."""
    if not args.print_config and not args.workdir:
        parser.error("the following argument is required: --workdir")


def print_config(config, kind, config_values, overrides, stream=None):
    """Prints a resolved config as YAML under a comment naming its sources.

    Args:
        config: the resolved config (a `RunConfig` or `FinetuneConfig`).
        kind: "pretrain" or "finetune".
        config_values: the `--config` values, as given.
        overrides: the `section.key=value` overrides applied after them.
        stream: where to print (default: stdout).
    """
    stream = stream or sys.stdout
    sources = " ".join([f"--config {c}" for c in config_values] + [f"--set {o}" for o in overrides])
    print(f"# Resolved xlnet-tf {kind} config ({sources or 'defaults only'}).", file=stream)
    print("# Every key below can be changed with --set SECTION.KEY=VALUE.", file=stream)
    print(config.to_yaml(), end="", file=stream)


def run_overrides(args):
    """The `--set` overrides followed by those the shorthand options stand for."""
    overrides = list(args.overrides)
    if args.strategy:
        overrides.append(f"distribution.strategy={args.strategy}")
    if args.tpu:
        overrides.append(f"distribution.tpu={args.tpu}")
    if args.virtual_cpu_devices is not None:
        overrides.append(f"distribution.virtual_cpu_devices={args.virtual_cpu_devices}")
    return overrides


def resolve_run_config(args, parser, kind, extra_overrides=()):
    """The config a `pretrain` / `finetune` command runs with, or the exit code it ends with.

    Resolves `--config` and `--set` (then the command's own shorthands,
    `extra_overrides`) into a validated config. A config error is printed as one
    `xlnet-tf KIND: ...` line (exit 2); `--print-config` prints the config (exit 0).
    TensorFlow is not imported on the way, so both stay fast.

    Returns:
        `(config, None)` to run, or `(None, exit_code)` when the command is done.
    """
    check_workdir(args, parser)
    try:
        files = config_files(args, kind)
    except UnknownConfigError as e:
        print(f"xlnet-tf {kind}: {e}", file=sys.stderr)
        return None, 2
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if kind == "pretrain":
        # import time: `--help` and argument errors answer without TensorFlow
        from xlnet_tf.pretraining.pretraining_config import load_run_config as load
    else:
        # import time: `--help` and argument errors answer without TensorFlow
        from xlnet_tf.finetuning.finetuning_config import load_finetune_config as load
    overrides = run_overrides(args) + list(extra_overrides)
    try:
        config = load(files, overrides)
    except ConfigError as e:
        print(f"xlnet-tf {kind}: {e}", file=sys.stderr)
        return None, 2
    if args.print_config:
        print_config(config, kind, args.config, overrides)
        return None, 0
    return config, None
