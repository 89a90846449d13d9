"""`xlnet-tf pretrain --config NAME_OR_FILE --workdir DIR [--set section.key=value ...]`.

Example:
    xlnet-tf pretrain --config tiny --workdir runs/tiny \\
        --set data.train_files=records/ --strategy mirrored --virtual-cpu-devices 2
    xlnet-tf pretrain --config base --set training.train_steps=1000 --print-config

Run the same command again after any interruption to resume. With the output sent to a
file, progress is one plain line per `training.log_every_steps` (`xlnet_tf.cli.plain_progress`).
"""

import sys
import os

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.plain_progress import progress_overrides, run_progress_callbacks
from xlnet_tf.cli.run_arguments import add_run_arguments, resolve_run_config
from xlnet_tf.training.strategy import StrategyError
from xlnet_tf.config_schema import ConfigError


def _parser():
    parser = CommandParser(prog="xlnet-tf pretrain", description=(
        "Pretrain XLNet with model.fit. YAML configs are sparse overrides applied in order; "
        "--set section.key=value overrides come last. Re-running the same command resumes."))
    add_run_arguments(parser, "run config", "pretrain")
    parser.add_argument("--no-export", action="store_true", help="skip the final export")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    progress = [] if args.print_config else progress_overrides(args.overrides)
    config, code = resolve_run_config(args, parser, "pretrain", progress)
    if config is None:
        return code
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.pretraining.pretraining_run import run_pretraining
    try:
        summary = run_pretraining(config, args.workdir, extra_callbacks=run_progress_callbacks(config, progress))
    except (ConfigError, StrategyError) as e:
        print(f"xlnet-tf pretrain: {e}", file=sys.stderr)
        return 2
    final = ", ".join(f"{k} {v:.4f}" for k, v in summary["final"].items())
    print(f"Done: {summary['train_steps']} steps on {summary['replicas']} replica(s); {final}.")
    if summary.get("loss_curve"):
        print(f"loss curve: {summary['loss_curve']}")
    if not args.no_export and summary.get("pretrainer") is not None:  # The chief exports.
        # import time: loaded only when the run asks for an export
        from xlnet_tf.serving.export_pretrained import export_pretrainer

        # The run's own export: a resumed or repeated run replaces it.
        exported = export_pretrainer(summary["pretrainer"], os.path.join(args.workdir, "export"),
                                     vocabulary=summary["vocabulary"], overwrite=True)
        for key, path in exported.items():
            print(f"{key}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
