"""`xlnet-tf finetune --config NAME_OR_FILE --init PRESET_DIR --workdir DIR [--set section.key=value ...]`.

Example:
    xlnet-tf finetune --config glue_mrpc --init presets/xlnet-base-cased \\
        --workdir runs/mrpc --set training.train_steps=800
    xlnet-tf finetune --config squad_v2.0 --print-config

Run the same command again after an interruption to resume. The fine-tuned
model lands in `WORKDIR/final/` (a task preset) for `xlnet-tf export`.
"""

import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.run_arguments import add_run_arguments, resolve_run_config
from xlnet_tf.training.strategy import StrategyError
from xlnet_tf.config_schema import ConfigError


def _parser():
    parser = CommandParser(prog="xlnet-tf finetune", description=(
        "Fine-tune an XLNet preset on a task (TFDS dataset or local JSONL/CSV/SQuAD files). YAML "
        "configs are sparse overrides applied in order; --set section.key=value comes last. "
        "Re-running the same command resumes."))
    add_run_arguments(parser, "fine-tuning config", "finetune")
    parser.add_argument("--init", metavar="PRESET_DIR",
                        help="initial preset directory (config.json, model.weights.h5, spiece.model)")
    parser.add_argument("--mixed-precision", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="same as --set training.mixed_precision=...")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    shorthands = []
    if args.init:
        shorthands.append(f"training.init_from={args.init}")
    if args.mixed_precision:
        shorthands.append(f"training.mixed_precision={args.mixed_precision}")
    config, code = resolve_run_config(args, parser, "finetune", shorthands)
    if config is None:
        return code
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.finetuning.finetuning_run import run_finetuning
    try:
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


if __name__ == "__main__":
    sys.exit(main())
