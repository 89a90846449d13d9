"""`xlnet-tf predict`: run an exported task SavedModel on raw text, print JSON lines.

Examples:

    xlnet-tf predict --model exports/sst2 "a fine film" "a dull film"
    xlnet-tf predict --model exports/mnli "A man plays." --pair "Someone makes music."
    xlnet-tf predict --model exports/squad "The fox jumps over the dog." --pair "Who jumps?"
    xlnet-tf predict --model exports/sst2 --jsonl reviews.jsonl --output predictions.jsonl

Only the SavedModel is used (its `serving_default` signature: tokenizer and
packer run inside the graph), so the output is what a TensorFlow Serving
deployment of the same directory answers.

Invalid UTF-8 (in TEXT arguments or --jsonl lines): each undecodable byte
sequence is replaced with U+FFFD before the model (what the SavedModel itself
does), the echoed input shows the replacement, and a warning on stderr names the
input; the output is always valid UTF-8 JSON. `--output` is written atomically
once every prediction is done (a failed run leaves no partial file).
"""

import argparse
import json
import os
import sys

METADATA_FILE = "xlnet_tf_serving.json"
# Per task: the strings-in signature's two inputs (first, second).
INPUT_NAMES = {"span": ("context", "question"), "multiple_choice": ("context", "choices")}
DEFAULT_INPUTS = ("text", "text_pair")
REPLACEMENT = "\ufffd"


def _clean(text, where, warnings):
    """`text` as valid Unicode: undecodable bytes (surrogate escapes, lone surrogates) -> U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    # Command-line bytes that are not UTF-8 arrive as surrogate escapes (PEP 383);
    # a JSON "\udXXX" escape gives a lone surrogate: both become U+FFFD.
    raw = bytearray()
    for char in text:
        if "\udc80" <= char <= "\udcff":
            raw.append(ord(char) - 0xDC00)  # the original byte
        elif "\ud800" <= char <= "\udfff":
            raw.extend(REPLACEMENT.encode("utf-8"))
        else:
            raw.extend(char.encode("utf-8"))
    warnings.append(where)
    return bytes(raw).decode("utf-8", "replace")


def _parser():
    parser = argparse.ArgumentParser(
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
    import tensorflow as tf

    return tf.io.gfile


def _read_metadata(model_dir):
    path = os.path.join(model_dir, METADATA_FILE)
    if not _gfile().exists(path):
        return {}
    with _gfile().GFile(path, "r") as f:
        return json.load(f)


def _jsonl_lines(path, warnings):
    """(line number, text) of a JSONL file; invalid UTF-8 bytes become U+FFFD (and are reported)."""
    if not _gfile().exists(path):
        raise FileNotFoundError(f"--jsonl file not found: {path}")
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
        raise ValueError(f"--pair was given {len(pairs)} times for {len(args.texts)} texts; give it once or once per text.")
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


def _to_python(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "tolist"):
        return _to_python(value.tolist())
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return value


def _format(task, row, outputs, index, label_names, top_k):
    text, pair = row
    if task == "span":
        record = {"context": text, "question": pair}
    elif task == "multiple_choice":
        record = {"context": text, "choices": pair}
    else:
        record = {"text": text}
    if task not in ("span", "multiple_choice") and pair is not None:
        record["text_pair"] = pair
    pick = {k: v[index] for k, v in outputs.items()}
    if task in ("classification", "multiple_choice"):
        probabilities = pick["probabilities"].tolist()
        record["label"] = int(pick["label"])
        if "label_name" in pick:
            record["label_name"] = _to_python(pick["label_name"])
        record["probabilities"] = probabilities
        if top_k > 0:
            order = sorted(range(len(probabilities)), key=lambda k: -probabilities[k])[:top_k]
            record["top_k"] = [
                {"label": k, **({"label_name": label_names[k]} if label_names else {}), "probability": probabilities[k]}
                for k in order
            ]
    elif task == "regression":
        record["score"] = float(pick["score"])
    elif task == "token_classification":
        keep = [i for i, piece in enumerate(pick["pieces"].tolist()) if piece]
        record["pieces"] = [_to_python(pick["pieces"][i]) for i in keep]
        record["labels"] = [int(pick["labels"][i]) for i in keep]
        if "label_names" in pick:
            record["label_names"] = [_to_python(pick["label_names"][i]) for i in keep]
    else:
        record["answer"] = _to_python(pick["answer_text"])
        record["answer_start"] = int(pick["answer_start"])
        record["answer_end"] = int(pick["answer_end"])
        record["score"] = _to_python(float(pick["score"]))
        record["null_score"] = float(pick["null_score"])
    return record


def main(argv=None):
    """Entry point of `xlnet-tf predict`; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.batch_size < 1:
        print("xlnet-tf predict: --batch-size must be >= 1.", file=sys.stderr)
        return 2
    if not _gfile().exists(os.path.join(args.model, "saved_model.pb")):
        print(f"xlnet-tf predict: {args.model!r} is not a SavedModel directory (no saved_model.pb).", file=sys.stderr)
        return 2
    metadata = _read_metadata(args.model)
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the strings-in signature)

    loaded = tf.saved_model.load(args.model)
    signature = loaded.signatures.get("serving_default")
    input_names = sorted(signature.structured_input_signature[1]) if signature is not None else []
    if signature is None or any(name in input_names for name in ("token_ids",)):
        print(f"xlnet-tf predict: {args.model!r} has no strings-in `serving_default` signature (it was exported "
              "ids-only); re-export with the text signature.", file=sys.stderr)
        return 2
    task = metadata.get("task") or ("span" if "context" in input_names else "classification")
    first, second = INPUT_NAMES.get(task, DEFAULT_INPUTS)
    has_pair = second in input_names
    warnings = []
    try:
        if task == "multiple_choice":
            rows = _choice_inputs(args, int(metadata.get("num_choices") or 0), warnings)
        elif args.choice:
            raise ValueError("--choice is only for multiple-choice models.")
        else:
            rows = _inputs(args, first, second, has_pair, warnings)
    except (ValueError, OSError) as e:
        print(f"xlnet-tf predict: {e}", file=sys.stderr)
        return 2
    for where in dict.fromkeys(warnings):
        print(f"xlnet-tf predict: warning: {where} is not valid UTF-8; each undecodable byte sequence "
              "was replaced with U+FFFD before the model.", file=sys.stderr)

    lines = []
    for start in range(0, len(rows), args.batch_size):
        batch = rows[start : start + args.batch_size]
        feed = {first: tf.constant([t.encode("utf-8") for t, _ in batch], tf.string)}
        if task == "multiple_choice":
            feed[second] = tf.constant(
                [[c.encode("utf-8") for c in choices] for _, choices in batch], tf.string)
        elif has_pair:
            feed[second] = tf.constant([p.encode("utf-8") for _, p in batch], tf.string)
        outputs = {k: v.numpy() for k, v in signature(**feed).items()}
        for i, row in enumerate(batch):
            record = _format(task, row, outputs, i, metadata.get("label_names"), args.top_k)
            line = json.dumps(record, ensure_ascii=False) + "\n"
            if args.output:
                lines.append(line)
            else:
                sys.stdout.write(line)
    if args.output:
        from xlnet_tf.storage.atomic_files import write_text

        # All or nothing: the file appears only once every prediction is made.
        write_text(args.output, "".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
