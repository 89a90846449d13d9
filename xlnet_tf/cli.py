"""`xlnet-tf`: the one console script. A thin front end: each subcommand's module
parses its own arguments and calls library functions.

Each entry maps a subcommand to `module:function`; the function takes the
remaining argv and returns an exit code. Modules are imported only when their
subcommand runs, so `xlnet-tf --help` stays fast and a broken optional
dependency only affects the command that needs it.
"""

import importlib
import sys

COMMANDS = {
    "convert": ("xlnet_tf.convert.cli:main", "checkpoint conversion (tf1 | transformers) to a preset directory"),
    "vocab": ("xlnet_tf.tokenizer_training:main", "train a SentencePiece vocabulary with XLNet's special ids"),
    "prepare-pretraining": ("pipelines.pretraining_data:main", "Beam job: raw text / TFDS -> pretraining TFRecords"),
    "pretrain": ("xlnet_tf.pretrain_cli:main", "pretrain with model.fit"),
    "quickstart": ("xlnet_tf.quickstart:main", "the whole main job on a built-in corpus (vocab, records, pretrain, export)"),
    "finetune": ("xlnet_tf.finetune_cli:main", "fine-tune a task model"),
    "prepare-finetuning": ("pipelines.finetuning_data:main", "Beam job: JSONL/CSV/TFDS -> fine-tuning TFRecords"),
    "export": ("xlnet_tf.export:main", "export a SavedModel from a work directory or preset"),
    "predict": ("xlnet_tf.predict:main", "run an exported SavedModel on text"),
}


def _usage() -> str:
    lines = ["usage: xlnet-tf COMMAND [ARGS...]", "", "commands:"]
    for name, (_, help_text) in COMMANDS.items():
        lines.append(f"  {name:<22}{help_text}")
    lines.append("")
    lines.append("Run `xlnet-tf COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"xlnet-tf: unknown command {command!r}.\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name = COMMANDS[command][0].split(":")
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
