"""`xlnet-tf`: the one console script. A thin front end: each subcommand's module
parses its own arguments and calls library functions.

Each entry maps a subcommand to `module:function`; the function takes the
remaining argv and returns an exit code. Modules are imported only when their
subcommand runs, so `xlnet-tf --help` stays fast and a broken optional
dependency only affects the command that needs it. Commands that need an
optional extra (`pip install "xlnet_tf[beam]"`) say so in one line when it is
missing.

The commands that train (`TRAINING_COMMANDS`) pick their Keras backend before
their module, and so Keras, is imported: `--backend`, else the run config's
top-level `backend:`, else `KERAS_BACKEND`, else TensorFlow
(`xlnet_tf.backend_selection.select_backend`). A bad name, or a Keras already
imported with another backend, is one line and exit code 2. `export` runs on
TensorFlow whatever the environment says: it reads presets, which every backend
writes, and builds a TensorFlow graph.

Global options come before the command: `--verbose` shows the libraries' own
log lines (TensorFlow's start-up notices, Beam's and absl's warnings), which
are silenced otherwise (`xlnet_tf.cli.library_logs`); `--version` prints the
installed version.
"""

import importlib
import importlib.metadata
import sys

from xlnet_tf import __version__  # the package's __init__ runs anyway: this module lives in it
from xlnet_tf.backend_selection import BackendError, select_backend  # no Keras import: safe before the choice
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.cli.library_logs import quiet_library_logs

COMMANDS = {
    "convert": ("xlnet_tf.cli.convert:main", "checkpoint conversion (tf1 | transformers) to a preset directory"),
    "vocab": ("xlnet_tf.cli.vocab:main", "train a SentencePiece vocabulary with XLNet's special ids"),
    "prepare-pretraining": ("xlnet_tf.cli.prepare_pretraining:main",
                            "Beam job: raw text / TFDS -> pretraining TFRecords"),
    "pretrain": ("xlnet_tf.cli.pretrain:main", "pretrain with model.fit"),
    "quickstart": ("xlnet_tf.cli.quickstart:main",
                   "the whole main job on a built-in corpus (vocab, records, pretrain, export)"),
    "finetune": ("xlnet_tf.cli.finetune:main", "fine-tune a task model"),
    "prepare-finetuning": ("xlnet_tf.cli.prepare_finetuning:main", "Beam job: JSONL/CSV/TFDS -> fine-tuning TFRecords"),
    "export": ("xlnet_tf.cli.export:main", "export a SavedModel from a work directory or preset"),
    "predict": ("xlnet_tf.cli.predict:main", "run an exported SavedModel on text"),
    "generate": ("xlnet_tf.cli.generate:main", "continue prompts with an exported SavedModel"),
    "configs": ("xlnet_tf.cli.configs:main", "list the shipped run configs (names for --config)"),
    "presets": ("xlnet_tf.cli.presets:main",
                "list the named presets; --download NAME fetches, checks and converts one"),
}

# Commands that train, and where their `--config NAME` looks for shipped configs. The quick start
# has no --config; it reads its own config's `backend:` itself, before its first stage.
TRAINING_COMMANDS = {"pretrain": "pretrain", "finetune": "finetune", "quickstart": "pretrain"}

# Commands that need an optional dependency: command -> (import name, extra that installs it).
NEEDS_EXTRA = {
    "prepare-pretraining": ("apache_beam", "beam"),
    "prepare-finetuning": ("apache_beam", "beam"),
    "quickstart": ("apache_beam", "beam"),
}


def _missing_extra(command, error=None):
    """The one-line message for a command whose optional dependency is missing, or None.

    Args:
        command: the subcommand.
        error: a `ModuleNotFoundError` raised while importing or running it; None
            to probe by importing the dependency.
    """
    if command not in NEEDS_EXTRA:
        return None
    module, extra = NEEDS_EXTRA[command]
    if error is None:
        try:
            importlib.import_module(module)
            return None
        except ModuleNotFoundError as e:
            error = e
    if (error.name or "").split(".")[0] != module:
        return None
    return (f"xlnet-tf {command}: needs {module} (not installed); install the extra: "
            f'pip install "xlnet_tf[{extra}]"')


def _backend_error(command, argv):
    """Sets `KERAS_BACKEND` for a training command from its arguments, and TensorFlow for `export` (a SavedModel
    is built from Keras layers on the TensorFlow backend, from presets that any backend wrote); the one-line
    error, or None."""
    if command not in TRAINING_COMMANDS and command != "export":
        return None
    try:
        if command == "export":
            select_backend(["--backend", "tensorflow"], config_paths=[])
        else:
            select_backend(argv, kind=TRAINING_COMMANDS[command])
    except (ConfigError, BackendError) as e:
        return f"xlnet-tf {command}: {e}"
    return None


def installed_version() -> str:
    """The version of the installed distribution; the package's own `__version__` when not installed.

    Example:
    >>> installed_version()  # doctest: +SKIP
    '0.1.0'
    """
    try:
        return importlib.metadata.version("xlnet_tf")
    except importlib.metadata.PackageNotFoundError:  # A checkout on PYTHONPATH.
        return __version__


def _usage() -> str:
    lines = ["usage: xlnet-tf [--verbose] COMMAND [ARGS...]", "       xlnet-tf --version", "", "commands:"]
    for name, (_, help_text) in COMMANDS.items():
        lines.append(f"  {name:<22}{help_text}")
    lines.append("")
    lines.append("options (before COMMAND):")
    lines.append(f"  {'--verbose':<22}show TensorFlow's, Beam's and absl's own log lines (hidden otherwise)")
    lines.append(f"  {'--version':<22}print the version and exit")
    lines.append("")
    lines.append("Run `xlnet-tf COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = bool(argv) and argv[0] == "--verbose"
    if verbose:
        argv = argv[1:]
    if argv and argv[0] == "--version":
        print(installed_version())
        return 0
    # Before any command module (and TensorFlow or Beam) is imported.
    quiet_library_logs(verbose)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"xlnet-tf: unknown command {command!r}.\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name = COMMANDS[command][0].split(":")
    # Checked before anything runs, so the quick start does not stop at its third stage.
    message = _missing_extra(command)
    if message:
        print(message, file=sys.stderr)
        return 1
    # Keras reads its backend once, when first imported: chosen before the command module loads.
    message = _backend_error(command, rest)
    if message:
        print(message, file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            print(f"xlnet-tf: command {command!r} is not available in this build ({e}).", file=sys.stderr)
            return 2
        raise
    return int(getattr(module, function_name)(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
