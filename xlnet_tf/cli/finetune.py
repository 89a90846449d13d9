"""`xlnet-tf finetune --config NAME_OR_FILE --init PRESET --workdir DIR [--set section.key=value ...]`.

Example:
    xlnet-tf finetune --config glue_mrpc --init xlnet_base_cased --workdir runs/mrpc
    xlnet-tf finetune --config glue_mrpc --init runs/base/export/preset \\
        --workdir runs/mrpc --set training.train_steps=800
    xlnet-tf finetune --config squad_v2.0 --print-config

`--init` takes a preset name (`xlnet-tf presets`; downloaded, checked and converted on first
use) or a preset directory. Integer class labels in a local training file without
`task.num_classes` give it as the largest label plus one, printed. Run the same command
again after an interruption to resume. The fine-tuned model lands in `WORKDIR/final/`
(a task preset) for `xlnet-tf export`.
"""

import dataclasses
import os
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.plain_progress import progress_overrides
from xlnet_tf.cli.run_arguments import add_run_arguments, resolve_run_config
from xlnet_tf.training.strategy import StrategyError
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.tasks.task_kinds import CLASSIFICATION


def _parser():
    parser = CommandParser(prog="xlnet-tf finetune", description=(
        "Fine-tune an XLNet preset on a task (TFDS dataset or local JSONL/CSV/SQuAD files). YAML "
        "configs are sparse overrides applied in order; --set section.key=value comes last. "
        "Re-running the same command resumes."))
    add_run_arguments(parser, "fine-tuning config", "finetune")
    parser.add_argument("--init", metavar="PRESET",
                        help="the pretrained model to start from: a preset name (`xlnet-tf presets` lists them; "
                             "downloaded on first use) or a preset directory in keras-hub's layout (config.json, "
                             "model.weights.h5, tokenizer.json and its vocabulary), such as a pretraining run's "
                             "export/preset or a fine-tuned run's final/; same as --set training.init_from=...")
    parser.add_argument("--mixed-precision", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="same as --set training.mixed_precision=...")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    shorthands = []
    if args.init:
        init = args.init if args.print_config else _initial_preset(args.init)
        if init is None:
            return 2
        shorthands.append(f"training.init_from={init}")
    if args.mixed_precision:
        shorthands.append(f"training.mixed_precision={args.mixed_precision}")
    if not args.print_config:
        # Off a terminal, Keras' bar would append every redraw to one line: one line per epoch instead.
        shorthands += [o.replace("=0", "=2") for o in progress_overrides(args.overrides)]
    config, code = resolve_run_config(args, parser, "finetune", shorthands)
    if config is None:
        return code
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.finetuning.finetuning_run import run_finetuning
    try:
        config = with_inferred_num_classes(config)
        summary = run_finetuning(config, args.workdir)
    except (ConfigError, StrategyError, FileNotFoundError) as e:
        print(f"xlnet-tf finetune: {e}", file=sys.stderr)
        return 2
    final = ", ".join(f"{k} {v:.4f}" for k, v in summary["final"].items())
    print(f"Done: {summary['train_steps']} steps on {summary['replicas']} replica(s); {final}.")
    for key, value in (summary.get("eval") or {}).items():
        if isinstance(value, float):
            print(f"eval {key}: {value:.4f}")
    if "final_dir" in summary:
        print(f"final model: {summary['final_dir']}")
    return 0


def _initial_preset(value):
    """`--init`'s preset directory: a directory as given, a named preset's cache (downloaded on first use).

    Prints the error and returns None for an unknown name or a failed download.
    """
    if os.path.isdir(os.path.expanduser(value)) or "://" in value:
        return value
    # import time: `--help` and argument errors answer without the preset machinery
    from xlnet_tf.presets import PresetError, preset_names, resolve_preset

    if value not in preset_names():
        return value  # Not a name: the run names the missing directory.
    try:
        return resolve_preset(value)
    except PresetError as e:
        print(f"xlnet-tf finetune: --init {value}: {e}", file=sys.stderr)
        return None


def with_inferred_num_classes(config, stream=None):
    """`config` with `task.num_classes` read off a classification training file's integer labels.

    Only when the task is classification, the config gives neither `task.num_classes`
    nor `task.label_names`, and `task.train_file` is a local file whose labels are all
    integers: `num_classes` is then the largest label plus one (at least 2), and a line
    saying so is printed. String labels are mapped by the run itself (`task.label_names`).

    Example:
    >>> import json, tempfile, os
    >>> from xlnet_tf import finetune_config_from_dict
    >>> from xlnet_tf.cli.finetune import with_inferred_num_classes
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write("\\n".join(json.dumps({"text": t, "label": y}) for t, y in [("good", 2), ("bad", 0)]))
    >>> config = finetune_config_from_dict({"task": {"task_type": "classification", "train_file": path},
    ...                                     "training": {"global_batch_size": 8}})
    >>> with_inferred_num_classes(config).task.num_classes  # doctest: +ELLIPSIS
    task.num_classes: 3, inferred from the integer labels 0..2 of .../train.jsonl (set task.num_classes to change it)
    3
    """
    task = config.task
    if task.task_type != CLASSIFICATION or task.num_classes or task.label_names or not task.train_file:
        return config
    if not os.path.isfile(task.train_file):
        return config
    # import time: read only when a run may need the class count
    from xlnet_tf.tasks.example_rows import is_int, rows

    field = task.label_field or "label"
    labels = {row[field] for _, row in rows(task.train_file) if isinstance(row, dict) and row.get(field) is not None}
    if not labels or not all(is_int(label) for label in labels):
        return config
    largest = max(int(label) for label in labels)
    num_classes = max(largest + 1, 2)
    print(f"task.num_classes: {num_classes}, inferred from the integer labels 0..{largest} of {task.train_file} "
          "(set task.num_classes to change it)", file=stream or sys.stdout)
    return dataclasses.replace(config, task=task.replace(num_classes=num_classes))


if __name__ == "__main__":
    sys.exit(main())
