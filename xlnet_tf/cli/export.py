"""`xlnet-tf export`: a task SavedModel from a fine-tuning run; a preset plus a SavedModel from pretraining.

Example:
    xlnet-tf export --workdir runs/tiny --output runs/tiny/export
    xlnet-tf export --workdir runs/mrpc --output exports/mrpc/1 --dtype bfloat16
    xlnet-tf export --workdir runs/mrpc --output exports/mrpc/2 --jit-compile
    xlnet-tf export --workdir runs/mrpc --output exports/mrpc/1 --overwrite   # replace an earlier export

The export itself is `xlnet_tf.serving.export_workdir` (fine-tuning work
directories: `xlnet_tf.serving.export_task_workdir`); this module parses the
options and prints the paths written.
"""

import os
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage.output_directory import OutputExistsError


def _parser():
    parser = CommandParser(
        prog="xlnet-tf export",
        description=(
            "Export a trained model for serving. From a fine-tuning work directory (or its final/ task "
            "preset): a task SavedModel whose serving_default takes raw text and serve_token_ids takes "
            "token ids. From a pretraining work directory, a ckpt-*.weights.h5 checkpoint or a backbone "
            "preset: OUTPUT/preset (a preset directory) and OUTPUT/saved_model (token ids in; with a "
            "vocabulary, also a generate signature that continues text)."))
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--workdir", help="a pretraining or fine-tuning work directory, or a fine-tuned task "
                                          "preset (a fine-tuning run's final/)")
    source.add_argument("--checkpoint", help="a ckpt-*.weights.h5 file written by pretraining")
    source.add_argument("--preset", help="a backbone preset directory (a task preset: use --workdir)")
    parser.add_argument("--config", help="run config of --checkpoint (default: the config.yaml "
                                         "of the work directory that holds it)")
    parser.add_argument("--output", required=True, help="output directory (new or empty; see --overwrite)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output: the new export is built beside it and renamed into "
                             "place, the old one removed only once the new one is complete")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="variables and compute of a task SavedModel (fine-tuning --workdir only); "
                             "bfloat16 halves the weights' size and is faster where the CPU has bfloat16 "
                             "matrix units, with probabilities close to, not equal to, float32's")
    parser.add_argument("--jit-compile", action="store_true",
                        help="XLA-compile the model call of a task SavedModel (fine-tuning --workdir only; the "
                             "tokenizer stays outside); loads in TF Serving's CPU and GPU builds")
    parser.add_argument("--no-trim-padding", action="store_true",
                        help="task SavedModel (fine-tuning --workdir only): give the model every column of a "
                             "request; otherwise a classifier's or multiple choice's SavedModel first cuts the "
                             "columns that are padding in every row (same answers, less work)")
    return parser


def _checkpoint_run_config(checkpoint, config):
    """The run config of `checkpoint`: `config`, or `config.yaml` of the work directory holding it."""
    import tensorflow as tf  # import time: `--help` and argument errors answer without TensorFlow

    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.serving.export_pretrained import ExportError
    if not tf.io.gfile.exists(checkpoint):
        raise ExportError(f"Checkpoint not found: {checkpoint}")
    checkpoint_dir = os.path.dirname(os.path.abspath(checkpoint) if atomic_files.is_local(checkpoint)
                                     else checkpoint)
    config = config or os.path.join(os.path.dirname(checkpoint_dir), "config.yaml")
    if not tf.io.gfile.exists(config):
        raise ExportError(f"No run config for {checkpoint}: pass --config FILE.")
    return config


def main(argv=None) -> int:
    """Entry point of `xlnet-tf export`; returns the exit code."""
    args = _parser().parse_args(argv)
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.serving.export_pretrained import (ExportError, export_from_checkpoint, export_preset,
                                                    export_workdir)
    try:
        trim_padding = False if args.no_trim_padding else None
        if args.workdir:
            result = export_workdir(args.workdir, args.output, dtype=args.dtype,
                                    jit_compile=args.jit_compile, trim_padding=trim_padding,
                                    overwrite=args.overwrite)
        elif args.dtype != "float32":
            raise ExportError(f"--dtype {args.dtype} needs --workdir of a fine-tuning run (a task "
                              "SavedModel); backbone presets are exported in float32.")
        elif args.jit_compile or args.no_trim_padding:
            raise ExportError("--jit-compile and --no-trim-padding need --workdir of a fine-tuning run "
                              "(a task SavedModel).")
        elif args.preset:
            result = export_preset(args.preset, args.output, overwrite=args.overwrite)
        else:
            config = _checkpoint_run_config(args.checkpoint, args.config)
            result = export_from_checkpoint(args.checkpoint, config, args.output, overwrite=args.overwrite)
    except OutputExistsError as e:
        print(f"xlnet-tf export: {e.message('--overwrite')}", file=sys.stderr)
        return 2
    except (ExportError, FileNotFoundError, ValueError) as e:
        print(f"xlnet-tf export: {e}", file=sys.stderr)
        return 2
    if isinstance(result, dict):
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
