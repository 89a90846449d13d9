"""Command-line options shared by `xlnet-tf pretrain` and `xlnet-tf finetune`.

Each option is a shorthand for a `--set section.key=value` override, so the
resolved config in the work directory records it like any other setting.
`--config` takes a YAML path or the name of a shipped config (`base`,
`glue_mrpc`, ...; `xlnet-tf configs` lists them; `xlnet_tf.training.shipped_configs`
resolves them). `--backend` is not a `--set` key: Keras reads its backend once, when it
is first imported, so `xlnet_tf.backend_selection.select_backend` reads it (then the
configs' top-level `backend:`, then `KERAS_BACKEND`) before anything imports Keras.
No TensorFlow import here: `--help` stays fast.
"""

import sys

from xlnet_tf.backend_selection import BackendError, select_backend
from xlnet_tf.training.shipped_configs import UnknownConfigError, config_names, resolve_config
from xlnet_tf.training.strategy import STRATEGIES as STRATEGY_CHOICES
from xlnet_tf.config_schema import BACKENDS, ConfigError


def add_run_arguments(parser, config_help, kind):
    """Adds --config, --workdir, --set, --backend, --strategy, --tpu, --virtual-cpu-devices and --print-config.

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
    add_backend_argument(parser)
    parser.add_argument("--strategy", choices=STRATEGY_CHOICES,
                        help="same as --set distribution.strategy=...")
    parser.add_argument("--tpu", metavar="NAME", help=(
        "the TPU to connect to: a TPU Node's or a pod slice's name, or grpc://IP:8470 (data and "
        "--workdir then on gs://); default: TPU_NAME, else this TPU VM's chips ('local')"))
    parser.add_argument("--virtual-cpu-devices", type=int, metavar="N",
                        help="split the CPU into N logical devices (try distribution on a laptop)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config (every key --set accepts) and exit")


def add_backend_argument(parser):
    """Adds `--backend {tensorflow,jax,torch}`, the Keras backend the run trains on."""
    parser.add_argument("--backend", choices=BACKENDS, help=(
        "the Keras backend to train on (distribution: tf.distribute on tensorflow, keras.distribution on jax); "
        "default: the run config's top-level `backend:`, else KERAS_BACKEND, else tensorflow"))


def apply_backend(args, config_paths, kind):
    """Sets the run's Keras backend (`select_backend`) from `args.backend` and the configs; an exit code on error.

    Called before the run imports Keras. An already imported Keras on another
    backend than the one asked for (a notebook, a test process) is one
    `xlnet-tf KIND: ...` line, never a silent run on the other backend.

    Args:
        args: the parsed arguments (`backend`).
        config_paths: the run's YAML files, in order.
        kind: the command, for the message ("pretrain", "finetune", "quickstart").

    Returns:
        None when the backend is set, else 2 (the error printed).
    """
    try:
        select_backend(["--backend", args.backend] if args.backend else [], config_paths)
    except (ConfigError, BackendError) as e:
        print(f"xlnet-tf {kind}: {e}", file=sys.stderr)
        return 2
    return None


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

    Sets the Keras backend (`apply_backend`: `--backend`, the configs' `backend:`,
    `KERAS_BACKEND`), then resolves `--config` and `--set` (then the command's own
    shorthands, `extra_overrides`) into a validated config. A config or backend error
    is printed as one `xlnet-tf KIND: ...` line (exit 2); `--print-config` prints the config (exit 0).
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
    code = apply_backend(args, files, kind)
    if code is not None:
        return None, code
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
