"""`xlnet-tf generate`: continue prompts with an exported SavedModel's `generate` signature.

Example:

    xlnet-tf generate --model runs/tiny/export "The river" "In the morning"
    xlnet-tf generate --model runs/tiny/export/saved_model --max-new-tokens 32 "The river"

Only the SavedModel is used (tokenizer, generation loop and detokenizer run inside
its graph), so the output is what a TensorFlow Serving deployment of the same
directory answers. One continuation per prompt is printed, one per line
(`--jsonl`: `{"prompt": ..., "continuation": ...}` per line).
"""

import json
import os
import re
import sys

from xlnet_tf.cli.command_parser import CommandParser


def _parser():
    parser = CommandParser(prog="xlnet-tf generate",
                           description="Continue prompts with an exported XLNet SavedModel (`generate` signature).")
    parser.add_argument("--model", required=True,
                        help="an `xlnet-tf export` output directory, or its saved_model/ directory")
    parser.add_argument("prompts", nargs="+", metavar="PROMPT", help="the beginnings to continue")
    parser.add_argument("--max-new-tokens", type=int, default=20, help="tokens to generate at most (default 20)")
    parser.add_argument("--jsonl", action="store_true", help="print JSON lines with the prompt and continuation")
    return parser


def saved_model_dir(path):
    """`path/saved_model` when `path` is an export directory, else `path`."""
    import tensorflow as tf  # import time: `--help` and argument errors answer without TensorFlow

    nested = os.path.join(path, "saved_model")
    return nested if tf.io.gfile.isdir(nested) else path


def main(argv=None) -> int:
    """Entry point of `xlnet-tf generate`; returns the exit code."""
    args = _parser().parse_args(argv)
    import tensorflow as tf  # import time: `--help` and argument errors answer without TensorFlow
    import tensorflow_text  # noqa: F401  import time: loaded with the model (its SentencePiece ops)

    path = saved_model_dir(args.model)
    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        print(f"xlnet-tf generate: {args.model} holds no SavedModel (saved_model.pb); pass the output "
              "directory of `xlnet-tf export`.", file=sys.stderr)
        return 2
    loaded = tf.saved_model.load(path)
    if "generate" not in loaded.signatures:
        print(f"xlnet-tf generate: the SavedModel {path} has no `generate` signature (signatures: "
              f"{', '.join(sorted(loaded.signatures))}); export a pretraining run or preset with its "
              "vocabulary.", file=sys.stderr)
        return 2
    try:
        out = loaded.signatures["generate"](prompt=tf.constant(args.prompts),
                                           max_new_tokens=tf.constant(args.max_new_tokens, tf.int32))
    except tf.errors.InvalidArgumentError as error:
        # The signature's own message (which names the input), without TensorFlow's frame.
        found = re.search(r"assertion failed: \[(.*?)\](?: \[|$)", error.message)
        print(f"xlnet-tf generate: {found.group(1) if found else error.message.strip()}", file=sys.stderr)
        return 2
    for prompt, text in zip(args.prompts, out["continuation"].numpy()):
        text = text.decode("utf-8", "replace")
        print(json.dumps({"prompt": prompt, "continuation": text}, ensure_ascii=False) if args.jsonl else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
