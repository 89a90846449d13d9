"""`xlnet-tf convert`: an original TF1 or Hugging Face checkpoint -> a preset directory."""

import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.convert.write_preset import write_preset

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
                             "transformers: a Hugging Face save_pretrained directory (config.json + model.safetensors).")
    parser.add_argument("--input", required=True,
                        help="release/save_pretrained directory, or (tf1) a checkpoint prefix.")
    parser.add_argument("--output", required=True, help="preset directory to write.")
    parser.add_argument("--config", default=None,
                        help="tf1 only: path of xlnet_config.json when it is not next to the checkpoint.")
    parser.add_argument("--verify", action="store_true",
                        help="run the converted model next to the source on a random batch and fail if the "
                             f"max abs logit difference exceeds {VERIFY_TOLERANCE:g}.")
    return parser


def main(argv=None):
    """Entry point of `xlnet-tf convert`; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.config and args.source != "tf1":
        print("xlnet-tf convert: --config applies to --source tf1 only.", file=sys.stderr)
        return 2
    try:
        if args.source == "tf1":
            from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint

            pretrainer, mapping, vocabulary = convert_tf1_checkpoint(args.input, config_path=args.config)
        else:
            from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint

            pretrainer, mapping, vocabulary = convert_transformers_checkpoint(args.input)
    except (ConversionError, ValueError, FileNotFoundError) as e:
        print(f"xlnet-tf convert: {e}", file=sys.stderr)
        return 1
    ignored = mapping.finish(pretrainer)
    try:
        write_preset(pretrainer, args.output, vocabulary)
    except OSError as e:
        print(f"xlnet-tf convert: cannot write the preset {args.output}: {e}", file=sys.stderr)
        return 1
    config = pretrainer.backbone.config
    print(f"converted {len(mapping.assigned_values)} weights from {args.input} ({args.source}): "
          f"{config.num_layers} layers, hidden {config.hidden_dim}, vocabulary {config.vocabulary_size}")
    if ignored:
        print(f"ignored {len(ignored)} non-model variable(s) (optimizer slots, step counter)")
    print(f"wrote preset {args.output}" + (" (with spiece.model)" if vocabulary else " (no spiece.model found)"))
    if args.verify:
        from xlnet_tf.convert.verify import verify_conversion

        worst = verify_conversion(pretrainer, args.source, args.input, mapping, args.output)
        if not worst <= VERIFY_TOLERANCE:
            print(f"xlnet-tf convert: verification failed: max abs difference {worst:.3g} > "
                  f"{VERIFY_TOLERANCE:g}", file=sys.stderr)
            return 1
        print(f"verify: OK (max abs difference {worst:.3g} <= {VERIFY_TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
