"""`xlnet-tf convert`: an original TF1 or Hugging Face checkpoint -> a preset directory."""

import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.convert.write_preset import write_preset
from xlnet_tf.storage.output_directory import OutputExistsError, check_output_directory
from xlnet_tf.convert import verify
from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint
from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint

VERIFY_TOLERANCE = 1e-4


def _parser():
    parser = CommandParser(
        prog="xlnet-tf convert",
        description="Convert an XLNet checkpoint into a preset directory "
                    "in keras-hub's layout (config.json, model.weights.h5, metadata.json, "
                    "lm_head.weights.h5; with a vocabulary tokenizer.json, "
                    "assets/tokenizer/vocabulary.spm and spiece.model).")
    parser.add_argument("--source", required=True, choices=("tf1", "transformers"),
                        help="tf1: original zihangdai/xlnet release (xlnet_config.json + xlnet_model.ckpt.*); "
                             "transformers: a Hugging Face save_pretrained directory "
                             "(config.json + model.safetensors).")
    parser.add_argument("--input", required=True,
                        help="release/save_pretrained directory, or (tf1) a checkpoint prefix.")
    parser.add_argument("--output", required=True, help="preset directory to write (new or empty; see --overwrite).")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output: the new preset is built beside it and renamed into "
                             "place, the old one removed only once the new one is complete (and verified).")
    parser.add_argument("--config", default=None,
                        help="tf1 only: path of xlnet_config.json when it is not next to the checkpoint.")
    parser.add_argument("--verify", action="store_true",
                        help="run the converted model next to the source on a random batch and fail if the "
                             f"max abs logit difference exceeds {VERIFY_TOLERANCE:g}.")
    return parser


def _verification(args, pretrainer, mapping):
    """`check(directory)` for `write_preset`: the conversion verified on the written preset before it is kept."""
    def check(directory):
        # The files reloaded here are the ones that become --output.
        worst = verify.verify_conversion(pretrainer, args.source, args.input, mapping, directory,
                                  log=lambda line: print(line.replace(directory, args.output)))
        if not worst <= VERIFY_TOLERANCE:
            raise ConversionError(f"verification failed: max abs difference {worst:.3g} > {VERIFY_TOLERANCE:g}; "
                                  f"nothing was written to {args.output}.")
        print(f"verify: OK (max abs difference {worst:.3g} <= {VERIFY_TOLERANCE:g})")

    return check


def main(argv=None):
    """Entry point of `xlnet-tf convert`; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.config and args.source != "tf1":
        print("xlnet-tf convert: --config applies to --source tf1 only.", file=sys.stderr)
        return 2
    try:
        # Before the conversion: a refused output costs nothing.
        check_output_directory(args.output, overwrite=args.overwrite, what="Preset directory",
                               sources=(args.input, args.config))
    except OutputExistsError as e:
        print(f"xlnet-tf convert: {e.message('--overwrite')}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"xlnet-tf convert: {e}", file=sys.stderr)
        return 2
    try:
        if args.source == "tf1":
            pretrainer, mapping, vocabulary = convert_tf1_checkpoint(args.input, config_path=args.config)
        else:
            pretrainer, mapping, vocabulary = convert_transformers_checkpoint(args.input)
    except (ConversionError, ValueError, FileNotFoundError) as e:
        print(f"xlnet-tf convert: {e}", file=sys.stderr)
        return 1
    ignored = mapping.finish(pretrainer)
    config = pretrainer.backbone.config
    print(f"converted {len(mapping.assigned_values)} weights from {args.input} ({args.source}): "
          f"{config.num_layers} layers, hidden {config.hidden_dim}, vocabulary {config.vocabulary_size}")
    if ignored:
        print(f"ignored {len(ignored)} non-model variable(s) (optimizer slots, step counter)")
    try:
        write_preset(pretrainer, args.output, vocabulary, overwrite=args.overwrite,
                     check=_verification(args, pretrainer, mapping) if args.verify else None)
    except OutputExistsError as e:  # filled by someone else meanwhile
        print(f"xlnet-tf convert: {e.message('--overwrite')}", file=sys.stderr)
        return 2
    except ValueError as e:  # a failed verification (ConversionError) included
        print(f"xlnet-tf convert: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"xlnet-tf convert: cannot write the preset {args.output}: {e}", file=sys.stderr)
        return 1
    print(f"wrote preset {args.output}" + (" (with spiece.model)" if vocabulary else " (no spiece.model found)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
