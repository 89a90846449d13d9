"""`xlnet-tf predict`: run an exported task SavedModel on raw text, print JSON lines.

Examples:

    xlnet-tf predict --model exports/sst2 "a fine film" "a dull film"
    xlnet-tf predict --model exports/mnli "A man plays." --pair "Someone makes music."
    xlnet-tf predict --model exports/squad "The fox jumps over the dog." --pair "Who jumps?"
    xlnet-tf predict --model exports/sst2 --jsonl reviews.jsonl --output predictions.jsonl

Only the SavedModel is used (its `serving_default` signature: tokenizer and
packer run inside the graph), so the output is what a TensorFlow Serving
deployment of the same directory answers. The model is run by
`xlnet_tf.serving.saved_model_predictor.SavedModelPredictor`; this module turns
TEXT arguments and --jsonl lines into its rows and prints its records.

Invalid UTF-8 (in TEXT arguments or --jsonl lines): each undecodable byte
sequence is replaced with U+FFFD before the model (what the SavedModel itself
does), the echoed input shows the replacement, and a warning on stderr names the
input; the output is always valid UTF-8 JSON. `--output` is written atomically
once every prediction is done (a failed run leaves no partial file).
"""

import json
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.text_normalization import replace_undecodable
from xlnet_tf.storage.output_directory import check_output_file
from xlnet_tf.storage.atomic_files import write_text


def _clean(text, where, warnings):
    """`text` as valid Unicode (`replace_undecodable`); `where` is noted in `warnings` when it was not."""
    text, positions = replace_undecodable(text)
    if positions:
        warnings.append(where)
    return text


def _parser():
    parser = CommandParser(
        prog="xlnet-tf predict",
        description="Run an exported XLNet task SavedModel on text; one JSON object per input on stdout.",
    )
    parser.add_argument("--model", required=True, help="SavedModel directory written by `xlnet-tf export`.")
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="Input texts (passages for question answering).")
    parser.add_argument("--pair", action="append", default=None, metavar="TEXT",
                        help="Second text (text_pair; the question for question answering). Give it once to use "
                             "it for every TEXT, or once per TEXT.")
    parser.add_argument("--jsonl", help="JSON-lines file of inputs: objects with `text` (and `text_pair`), or "
                                        "`context` and `question` for question answering.")
    parser.add_argument("--choice", action="append", default=None, metavar="TEXT",
                        help="Multiple-choice models: one answer option (give it once per option, the same "
                             "options for every TEXT); --jsonl rows carry `context` and a `choices` list.")
    parser.add_argument("--output", help="Write JSON lines here instead of stdout.")
    parser.add_argument("--batch-size", type=int, default=32, help="Inputs per call (default 32).")
    parser.add_argument("--top-k", type=int, default=0,
                        help="Classification: also list the k most probable labels (default 0: off).")
    return parser


def _gfile():
    # The model and input files may be on any tf.io.gfile filesystem (gs://, ram://).
    import tensorflow as tf  # import time: `--help` and argument errors answer without TensorFlow

    return tf.io.gfile


def _jsonl_lines(path, warnings):
    """(line number, text) of a JSONL file; invalid UTF-8 bytes become U+FFFD (and are reported)."""
    if not _gfile().exists(path):
        raise FileNotFoundError(f"--jsonl file not found: {path}")
    if _gfile().isdir(path):
        raise ValueError(f"--jsonl {path} is a directory; give a JSON-lines file.")
    with _gfile().GFile(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("utf-8", "replace")
                warnings.append(f"{path}:{number}")
            yield number, line


def _jsonl_records(path, warnings):
    """(line number, parsed JSON) of every non-blank line; bad JSON names the file and line."""
    for number, line in _jsonl_lines(path, warnings):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not valid JSON ({e.msg}).") from None


def _read_jsonl(path, first, second, warnings):
    rows = []
    for number, record in _jsonl_records(path, warnings):
        if not isinstance(record, dict) or first not in record:
            raise ValueError(f"{path}:{number}: expected an object with a {first!r} field.")
        where = f"{path}:{number}"
        rows.append((_clean(str(record[first]), where, warnings),
                     None if record.get(second) is None else _clean(str(record[second]), where, warnings)))
    return rows


def _choice_inputs(args, num_choices, warnings):
    """(context, [choices]) rows of a multiple-choice model, from --jsonl and TEXT + --choice."""
    rows = []
    if args.jsonl:
        for number, record in _jsonl_records(args.jsonl, warnings):
            if not isinstance(record, dict) or "context" not in record or not isinstance(
                    record.get("choices"), list):
                raise ValueError(f"{args.jsonl}:{number}: expected an object with `context` and a "
                                 "`choices` list.")
            where = f"{args.jsonl}:{number}"
            rows.append((_clean(str(record["context"]), where, warnings),
                         [_clean(str(c), where, warnings) for c in record["choices"]]))
    for index, text in enumerate(args.texts, 1):
        rows.append((_clean(text, f"TEXT argument {index}", warnings),
                     [_clean(c, "a --choice argument", warnings) for c in args.choice or []]))
    if not rows:
        raise ValueError("no input: give TEXT arguments with --choice, or --jsonl FILE.")
    for context, choices in rows:
        if len(choices) != num_choices:
            raise ValueError(f"this model takes exactly {num_choices} choices per input, got {len(choices)} "
                             f"for {context[:40]!r}.")
    return rows


def _inputs(args, first, second, has_pair, warnings):
    rows = []
    if args.jsonl:
        rows.extend(_read_jsonl(args.jsonl, first, second, warnings))
    pairs = args.pair or []
    if pairs and len(pairs) not in (1, len(args.texts)):
        raise ValueError(f"--pair was given {len(pairs)} times for {len(args.texts)} texts; "
                         "give it once or once per text.")
    for i, text in enumerate(args.texts):
        pair = (pairs[0] if len(pairs) == 1 else pairs[i]) if pairs else None
        rows.append((_clean(text, f"TEXT argument {i + 1}", warnings),
                     None if pair is None else _clean(pair, "a --pair argument", warnings)))
    if not rows:
        raise ValueError("no input: give TEXT arguments or --jsonl FILE.")
    if has_pair and any(p is None for _, p in rows):
        raise ValueError(f"this model takes two texts: give --pair (or `{second}` in --jsonl) for every input.")
    if not has_pair and any(p is not None for _, p in rows):
        raise ValueError("this model takes one text; --pair / text_pair is not used by it.")
    return rows


def main(argv=None):
    """Entry point of `xlnet-tf predict`; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.batch_size < 1:
        print("xlnet-tf predict: --batch-size must be >= 1.", file=sys.stderr)
        return 2
    if args.top_k < 0:
        print("xlnet-tf predict: --top-k must be >= 0 (0: off).", file=sys.stderr)
        return 2
    if args.output:
        try:
            # Before the model runs: a path that cannot be written would fail only at the end.
            check_output_file(args.output, what="--output")
        except ValueError as e:
            print(f"xlnet-tf predict: {e}", file=sys.stderr)
            return 2
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.serving.saved_model_predictor import SavedModelPredictor

    try:
        predictor = SavedModelPredictor(args.model)
    except ValueError as e:
        print(f"xlnet-tf predict: {e}", file=sys.stderr)
        return 2
    first, second = predictor.input_names
    warnings = []
    try:
        if predictor.takes_choices:
            rows = _choice_inputs(args, predictor.num_choices, warnings)
        elif args.choice:
            raise ValueError("--choice is only for multiple-choice models.")
        else:
            rows = _inputs(args, first, second, predictor.has_pair, warnings)
    except (ValueError, OSError) as e:
        print(f"xlnet-tf predict: {e}", file=sys.stderr)
        return 2
    for where in dict.fromkeys(warnings):
        print(f"xlnet-tf predict: warning: {where} is not valid UTF-8; each undecodable byte sequence "
              "was replaced with U+FFFD before the model.", file=sys.stderr)

    lines = []
    for record in predictor.predict(rows, batch_size=args.batch_size, top_k=args.top_k):
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if args.output:
            lines.append(line)
        else:
            sys.stdout.write(line)
    if args.output:
        # All or nothing: the file appears only once every prediction is made.
        write_text(args.output, "".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
