"""`xlnet-tf generate`: continue prompts with an exported SavedModel's `generate` signature.

Example:

    xlnet-tf generate --model runs/tiny/export "The river" "In the morning"
    xlnet-tf generate --model runs/tiny/export/saved_model --max-new-tokens 32 "The river"

Only the SavedModel is used (tokenizer, generation loop and detokenizer run inside
its graph), so the output is what a TensorFlow Serving deployment of the same
directory answers. One continuation per prompt is printed, one per line
(`--jsonl`: `{"prompt": ..., "continuation": ...}` per line).

A PROMPT that is not valid UTF-8 has each undecodable byte sequence replaced
with U+FFFD before the model (what the SavedModel does with such bytes), and a
warning on stderr names it. A request the signature refuses (an empty or blank
prompt, one longer than the exported window, `--max-new-tokens` outside the
exported range) is reported in one line naming the prompt (counted from 0),
exit status 2.
"""

import json
import os
import re
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.undecodable_text import valid_text, warn_undecodable

# The signature's `max_new_tokens` is an int32; whether a value is allowed is the signature's to say.
INT32_RANGE = (-2 ** 31, 2 ** 31 - 1)


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


def _refusal(error):
    """The signature's own message of a refused request (its assertion's parts joined), without TensorFlow's frame."""
    for line in error.message.splitlines():
        found = re.match(r"assertion failed: \[(.*)\]\s*$", line.strip())
        if found:
            return " ".join(found.group(1).split("] ["))
    return " ".join(error.message.split())


def main(argv=None) -> int:
    """Entry point of `xlnet-tf generate`; returns the exit code."""
    args = _parser().parse_args(argv)
    if not INT32_RANGE[0] <= args.max_new_tokens <= INT32_RANGE[1]:
        print(f"xlnet-tf generate: --max-new-tokens {args.max_new_tokens} is not an int32; pass at most the "
              "export's max_new_tokens.", file=sys.stderr)
        return 2
    import tensorflow as tf  # import time: `--help` and argument errors answer without TensorFlow
    import tensorflow_text  # noqa: F401  import time: loaded with the model (its SentencePiece ops)

    warnings = []
    prompts = [valid_text(prompt, f"PROMPT argument {number}", warnings)
               for number, prompt in enumerate(args.prompts, start=1)]
    warn_undecodable("generate", warnings)
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
        out = loaded.signatures["generate"](prompt=tf.constant(prompts),
                                           max_new_tokens=tf.constant(args.max_new_tokens, tf.int32))
    except tf.errors.InvalidArgumentError as error:
        print(f"xlnet-tf generate: {_refusal(error)}", file=sys.stderr)
        return 2
    for prompt, text in zip(prompts, out["continuation"].numpy()):
        text = text.decode("utf-8", "replace")
        print(json.dumps({"prompt": prompt, "continuation": text}, ensure_ascii=False) if args.jsonl else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
