"""`xlnet-tf predict`: run an exported task SavedModel on raw text, print JSON lines.

Examples:

    xlnet-tf predict --model exports/sst2 "a fine film" "a dull film"
    xlnet-tf predict --model exports/mnli "A man plays." --pair "Someone makes music."
    xlnet-tf predict --model exports/squad "The fox jumps over the dog." --pair "Who jumps?"
    xlnet-tf predict --model exports/race "Ann walked home in the rain." --question "How did Ann get home?" \
        --choice "by bus" --choice "on foot" --choice "by car" --choice "by bike"
    xlnet-tf predict --model exports/sst2 --jsonl reviews.jsonl --output predictions.jsonl

Only the SavedModel is used (its `serving_default` signature: tokenizer and
packer run inside the graph), so the output is what a TensorFlow Serving
deployment of the same directory answers. The model is run by
`xlnet_tf.serving.saved_model_predictor.SavedModelPredictor`; this module turns
TEXT arguments and --jsonl lines into its rows and prints its records.

Multiple choice: each row is a context, its question and the options, packed as
fine-tuning packed them (`context <sep> question option <sep> <cls>`). A model
fine-tuned with questions needs one on every row (`--question`, or `question` in
each --jsonl row; "" says the row has none); one fine-tuned without questions
(its signature has no `question` input) refuses them. Every row is checked by
`SavedModelPredictor.checked_row`, so a missing context, choices that are not a
list of the model's number of strings, or a question that is not a string is one
line naming the file and line (or the TEXT argument).

Invalid UTF-8 (in TEXT arguments or --jsonl lines): each undecodable byte
sequence is replaced with U+FFFD before the model (what the SavedModel itself
does), the echoed input shows the replacement, and a warning on stderr names the
input; the output is always valid UTF-8 JSON. `--output` is written atomically
once every prediction is done (a failed run leaves no partial file).
"""

import json
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.undecodable_text import valid_text, warn_undecodable
from xlnet_tf.storage.output_directory import check_output_file
from xlnet_tf.storage.atomic_files import write_text


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
    parser.add_argument("--jsonl", help="JSON-lines file of inputs: objects with `text` (and `text_pair`), "
                                        "`context` and `question` for question answering, or `context`, "
                                        "`question` and a `choices` list for multiple choice.")
    parser.add_argument("--choice", action="append", default=None, metavar="TEXT",
                        help="Multiple-choice models: one answer option (give it once per option, the same "
                             "options for every TEXT); --jsonl rows carry `context`, `question` and a "
                             "`choices` list.")
    parser.add_argument("--question", action="append", default=None, metavar="TEXT",
                        help="Multiple-choice models: the question the options answer. Give it once to use it "
                             "for every TEXT, or once per TEXT ('' for none).")
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
        rows.append((valid_text(str(record[first]), where, warnings),
                     None if record.get(second) is None else valid_text(str(record[second]), where, warnings)))
    return rows


def _per_text(values, texts, flag):
    """`values` of a flag given once (for every TEXT) or once per TEXT, one per TEXT."""
    if len(values) not in (1, len(texts)):
        raise ValueError(f"{flag} was given {len(values)} times for {len(texts)} texts; "
                         "give it once or once per text.")
    return values * len(texts) if len(values) == 1 else values


def _choice_flags(args, predictor):
    """The TEXT-argument rows of a multiple-choice model, as dicts; a flag it cannot use is an error."""
    if args.pair:
        raise ValueError("--pair is not used by multiple-choice models; give the question with --question and "
                         "each option with --choice.")
    if not args.texts:
        if args.choice or args.question:
            raise ValueError("--choice and --question go with TEXT arguments (the contexts); --jsonl rows carry "
                             "their own `question` and `choices`.")
        return []
    if not args.choice:
        raise ValueError(f"give each option with --choice (this model takes exactly {predictor.num_choices}).")
    questions = _per_text(args.question, args.texts, "--question") if args.question else [None] * len(args.texts)
    if predictor.takes_question and not args.question:
        raise ValueError("this multiple-choice model was fine-tuned with a question before each choice: give "
                         "--question TEXT (once for every TEXT, or once per TEXT; --question '' for none).")
    if not predictor.takes_question and any(questions):
        raise ValueError("--question: this multiple-choice model was fine-tuned without questions (its signature "
                         "takes `context` and `choices` only); leave --question out.")
    return [{"context": text, "question": question, "choices": list(args.choice)}
            for text, question in zip(args.texts, questions)]


def _cleaned_choice_row(row, where, warnings):
    """A checked multiple-choice row with every string valid Unicode (`_clean`)."""
    return tuple([valid_text(c, where, warnings) for c in field] if isinstance(field, list)
                 else valid_text(field, where, warnings) for field in row)


def _choice_inputs(args, predictor, warnings):
    """Checked `(context, [question,] [choices])` rows of a multiple-choice model, from --jsonl and TEXT."""
    rows = []
    if args.jsonl:
        for number, record in _jsonl_records(args.jsonl, warnings):
            where = f"{args.jsonl}:{number}"
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected an object with `context`, `question` and a `choices` list, "
                                 f"got {type(record).__name__}.")
            rows.append(_cleaned_choice_row(predictor.checked_row(record, where), where, warnings))
    for index, record in enumerate(_choice_flags(args, predictor), 1):
        where = f"TEXT argument {index}"
        rows.append(_cleaned_choice_row(predictor.checked_row(record, where), where, warnings))
    if not rows:
        raise ValueError("no input: give TEXT arguments with --question and --choice, or --jsonl FILE.")
    return rows


def _inputs(args, first, second, has_pair, warnings):
    rows = []
    if args.jsonl:
        rows.extend(_read_jsonl(args.jsonl, first, second, warnings))
    pairs = _per_text(args.pair, args.texts, "--pair") if args.pair else [None] * len(args.texts)
    for i, (text, pair) in enumerate(zip(args.texts, pairs)):
        rows.append((valid_text(text, f"TEXT argument {i + 1}", warnings),
                     None if pair is None else valid_text(pair, "a --pair argument", warnings)))
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
            rows = _choice_inputs(args, predictor, warnings)
        elif args.choice:
            raise ValueError("--choice is only for multiple-choice models.")
        elif args.question:
            raise ValueError("--question is only for multiple-choice models" + (
                "; a question-answering model takes its question with --pair (or `question` in --jsonl rows)."
                if predictor.input_names[1] == "question" else "."))
        else:
            rows = _inputs(args, first, second, predictor.has_pair, warnings)
        # The rows are checked first: a mistake in them is told without waiting for the model.
        predictor.load()
    except (ValueError, OSError) as e:
        print(f"xlnet-tf predict: {e}", file=sys.stderr)
        return 2
    warn_undecodable("predict", warnings)

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
