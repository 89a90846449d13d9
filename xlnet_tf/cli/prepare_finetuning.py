"""`xlnet-tf prepare-finetuning`: the Beam job JSONL / CSV / SQuAD JSON / TFDS -> fine-tuning TFRecords.

Example:
    xlnet-tf prepare-finetuning --task-type classification --input train=train.jsonl \\
        --input validation=dev.csv --vocab spiece.model --sequence-length 128 --output-dir data/mine
    xlnet-tf prepare-finetuning --task-type classification --tfds glue/mrpc \\
        --tfds-splits train,validation --vocab spiece.model --output-dir data/mrpc

Options this command does not know go to Beam's `PipelineOptions` unchanged
(`--runner DataflowRunner --project ...`). This module checks the command line
and resolves it once into the task (`TaskSpec`: text and label columns, classes,
packing), the job's own settings (`FinetuningJobSettings`), the splits and their
files, and the vocabulary; `xlnet_tf.beam.finetuning_data.prepare_finetuning_data`
runs the job.
"""

import hashlib
import os
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.formats.finetuning_records import FORMAT
from xlnet_tf.tasks import LONG_DOCUMENT_TASK_TYPES, TASK_TYPES, task_type
from xlnet_tf.tasks import example_rows
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.beam.finetuning_job_settings import FinetuningJobSettings
from xlnet_tf.beam.pipeline_input_error import PipelineInputError


def _parser():
    parser = CommandParser(
        prog="xlnet-tf prepare-finetuning",
        description=f"Beam job: JSONL/CSV/SQuAD JSON/TFDS -> fine-tuning TFRecords ({FORMAT}). Unknown arguments "
                    "go to Beam's PipelineOptions (e.g. --runner DataflowRunner --project ...).",
    )
    parser.add_argument("--task-type", choices=TASK_TYPES, required=True)
    parser.add_argument("--input", action="append", default=[], metavar="SPLIT=FILE[,FILE...]",
                        help="files or globs of one split (repeat per split; a split given again adds its files "
                        "after the earlier ones), e.g. train=train.jsonl")
    parser.add_argument("--tfds", default=None, help="TFDS dataset name, e.g. glue/mrpc, imdb_reviews, squad/v1.1")
    parser.add_argument("--tfds-splits", default="train", help="comma-separated TFDS splits (default train)")
    parser.add_argument("--tfds-data-dir", default=None)
    parser.add_argument("--tfds-read-shards", type=int, default=1,
                        help="read each TFDS split as this many even sub-splits, in parallel (default 1); "
                        "example ids are those of reading it whole")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--vocab", required=True, help="spiece.model with XLNet's special ids")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--max-segments", type=int, default=1,
                        help="classification/regression/multiple choice: pack each document at max_segments * "
                             "sequence_length pieces, fed as that many segments (the config's task.max_segments); "
                             "default 1")
    parser.add_argument("--text-fields", default=None, help="comma-separated text columns (default text,text_pair)")
    parser.add_argument("--label-field", default=None, help="label column (default label; tags for tokens)")
    parser.add_argument("--label-names", default=None, help="comma-separated class names, in id order")
    parser.add_argument("--truncate", choices=("longest_first", "keep_second"), default="longest_first")
    parser.add_argument("--lowercase", action="store_true", help="for uncased vocabularies")
    parser.add_argument("--max-query-length", type=int, default=64)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-qa-length", type=int, default=128,
                        help="multiple choice: cap on the question + option pieces (original RACE: 128)")
    parser.add_argument("--num-shards", type=int, default=4, help="files per split")
    parser.add_argument("--seed", type=int, default=0, help="decides the shard of each example")
    parser.add_argument("--encode-batch-size", type=int, default=256)
    parser.add_argument("--strict", action="store_true", help="fail on the first bad example instead of skipping")
    parser.add_argument("--read-range-bytes", type=int, default=64 << 20,
                        help="JSONL files larger than this are read as ranges of this many bytes, on "
                        "several workers (default 67108864, 64 MiB)")
    parser.add_argument("--shared-filesystem", action="store_true",
                        help="local paths are on a filesystem every worker mounts at the same place "
                        "(allows them with Dataflow, Flink, Spark)")
    parser.add_argument("--overwrite", action="store_true", help="replace records already in the output directory")
    return parser


def _input_patterns(specs):
    """`--input SPLIT=FILE[,FILE...]` values -> `[(split, [file or glob, ...])]`, splits in first-given order.

    A split given again adds its files after its earlier ones (as one comma-separated list would).
    """
    patterns = {}
    for spec in specs:
        split, sep, files = spec.partition("=")
        paths = [p for p in files.split(",") if p]
        if not sep or not split or not paths:
            raise PipelineInputError(f"--input {spec!r}: expected SPLIT=FILE[,FILE...], e.g. train=train.jsonl.")
        if not split.replace("_", "").isalnum():
            raise PipelineInputError(f"--input {spec!r}: split name {split!r} must be letters, digits or '_'.")
        patterns.setdefault(split, []).extend(paths)
    return list(patterns.items())


def _resolve(args):
    """The job's `(task, job, sources, vocab_proto, vocabulary)`; raises `PipelineInputError` naming a bad option.

    `task` is the `TaskSpec` of the records, `job` the `FinetuningJobSettings` of the Beam job.
    """
    _check_numbers(args)
    if bool(args.input) == bool(args.tfds):
        raise PipelineInputError("give either --input SPLIT=FILES (repeatable) or --tfds NAME, not both or neither.")
    input_patterns = _input_patterns(args.input)
    # import time: Beam and TensorFlow load once the arguments are checked
    from xlnet_tf.beam.job_files import expand_input_files, load_vocabulary

    sources = [(split, "files", expand_input_files(patterns)) for split, patterns in input_patterns]
    dataset = _tfds_dataset(args, sources)
    proto, _ = load_vocabulary(args.vocab)
    vocabulary_size = _vocabulary_size(args, proto)
    entry = task_type(args.task_type)
    label_field = args.label_field or entry.label_field
    tfds_fields = list(dataset.text_fields) or None if dataset else None
    label_names, num_choices = _classes(args, entry, sources, label_field, dataset)
    task = TaskSpec(
        task_type=args.task_type, sequence_length=args.sequence_length, max_segments=args.max_segments,
        text_fields=_text_fields(args, entry, sources, tfds_fields), label_field=label_field,
        label_names=label_names, num_classes=num_choices, truncate=args.truncate, lowercase=args.lowercase,
        max_query_length=args.max_query_length, doc_stride=args.doc_stride, max_qa_length=args.max_qa_length)
    job = FinetuningJobSettings(
        output_dir=args.output_dir, num_shards=args.num_shards, seed=args.seed,
        encode_batch_size=args.encode_batch_size, strict=args.strict, tfds=args.tfds,
        tfds_data_dir=args.tfds_data_dir, tfds_read_shards=args.tfds_read_shards, tfds_text_fields=tfds_fields,
        tfds_label_field=args.label_field if args.tfds else None, input=list(args.input),
        read_range_bytes=args.read_range_bytes, shared_filesystem=args.shared_filesystem)
    vocabulary = {"file": os.path.abspath(args.vocab) if "://" not in args.vocab else args.vocab,
                  "sha256": hashlib.sha256(proto).hexdigest(), "vocabulary_size": int(vocabulary_size)}
    return task, job, sources, proto, vocabulary


def _check_numbers(args):
    """Refuses a number option out of its range, naming it."""
    if args.sequence_length < 4:
        raise PipelineInputError(f"--sequence-length must be >= 4, got {args.sequence_length}.")
    if args.max_segments < 1:
        raise PipelineInputError(f"--max-segments must be >= 1, got {args.max_segments}.")
    if args.max_segments > 1 and args.task_type not in LONG_DOCUMENT_TASK_TYPES:
        raise PipelineInputError(f"--max-segments {args.max_segments} is only for --task-type "
                                 f"{' or '.join(LONG_DOCUMENT_TASK_TYPES)}, not {args.task_type}.")
    if args.read_range_bytes < 1:
        raise PipelineInputError(f"--read-range-bytes must be >= 1, got {args.read_range_bytes}.")
    if args.num_shards < 1:
        raise PipelineInputError(f"--num-shards must be >= 1, got {args.num_shards}.")
    if args.tfds_read_shards < 1:
        raise PipelineInputError(f"--tfds-read-shards must be >= 1, got {args.tfds_read_shards}.")


def _tfds_dataset(args, sources):
    """`--tfds`'s `DatasetSpec` (None without it); its splits are added to `sources`."""
    if not args.tfds:
        return None
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.data.finetuning_tasks import dataset_spec

    try:
        dataset = dataset_spec(args.tfds)
    except ValueError as e:
        raise PipelineInputError(str(e)) from None
    if dataset.task_type != args.task_type:
        raise PipelineInputError(f"--tfds {args.tfds} is a {dataset.task_type} dataset, not {args.task_type}.")
    for split in [s for s in args.tfds_splits.split(",") if s]:
        sources.append((split.replace("[", "_").replace("]", "").replace(":", "_").replace("%", "pct"),
                        "tfds", (args.tfds, split)))
    splits = [split for split, _, _ in sources]
    repeated = sorted({split for split in splits if splits.count(split) > 1})
    if repeated:
        raise PipelineInputError(f"--tfds-splits {args.tfds_splits!r} names the split {repeated[0]!r} twice; "
                                 "give each split once.")
    return dataset


def _vocabulary_size(args, proto):
    # import time: `--help` and argument errors answer without TensorFlow
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    try:
        return XLNetTokenizer(proto).vocabulary_size()
    except ValueError as e:
        raise PipelineInputError(f"--vocab {args.vocab!r}: {e}") from None


def _text_fields(args, entry, sources, tfds_fields):
    """`--text-fields`, else the dataset's, else `text` and `text_pair` when any row of a pair task has one."""
    if args.text_fields:
        return args.text_fields.split(",")
    if args.input and entry.pairs:
        # import time: Beam and TensorFlow load once the arguments are checked
        from xlnet_tf.beam.finetuning_data import present_text_fields

        return present_text_fields([path for _, _, paths in sources for path in paths])
    return tfds_fields or ["text", "text_pair"]


def _classes(args, entry, sources, label_field, dataset):
    """`(label_names, num_choices)`: the task's classes, and the options of every question (multiple choice, else 0).

    Label names are `--label-names`, else the dataset's, else the first split's string labels where the
    task type names its classes so; the options are counted in the first file's first row (or the dataset's).
    """
    # import time: Beam and TensorFlow load once the arguments are checked
    from xlnet_tf.beam.job_files import reading

    label_names = args.label_names.split(",") if args.label_names else None
    if dataset and not label_names:
        label_names = list(dataset.label_names) or None
    source = f"--input {args.input[0]!r}" if args.input else f"--tfds {args.tfds}"
    first_files = sources[0][2] if args.input else []
    try:
        if first_files and entry.label_names_from_file and not label_names:
            with reading(*first_files):
                label_names = example_rows.infer_label_names(first_files, label_field)
        with reading(*first_files[:1]):
            num_choices = entry.resolve_num_choices(first_files[0] if first_files else None, dataset)
    except PipelineInputError:
        raise
    except ValueError as e:
        raise PipelineInputError(f"{source}: {e}") from None
    return label_names, num_choices


def run(argv=None):
    """Parses `argv`, runs the job and returns its manifest (also written to the output directory).

    Raises:
        PipelineInputError: a bad input, vocabulary or setting, before the pipeline starts.
    """
    # import time: Beam and TensorFlow load once the arguments are checked
    from xlnet_tf.beam.finetuning_data import prepare_finetuning_data

    args, beam_args = _parser().parse_known_args(argv)
    task, job, sources, proto, vocabulary = _resolve(args)
    return prepare_finetuning_data(task, job, sources, proto, vocabulary, overwrite=args.overwrite,
                                   beam_args=beam_args)


def main(argv=None):
    """Entry point of `xlnet-tf prepare-finetuning`; returns the exit code."""
    try:
        manifest = run(argv)
    except PipelineInputError as e:
        print(f"xlnet-tf prepare-finetuning: error: {e}", file=sys.stderr)
        return 2
    examples = manifest["examples"]
    splits = ", ".join(f"{name}: {s['num_records']}" for name, s in manifest["splits"].items())
    print(f"Wrote {manifest['num_records']} records ({splits}). Examples: {examples['read']} read, "
          f"{examples['written']} written, skipped {examples['skipped']}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
