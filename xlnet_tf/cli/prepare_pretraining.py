"""`xlnet-tf prepare-pretraining`: the Beam job raw text / TFDS corpora -> pretraining TFRecords.

Example:
    xlnet-tf prepare-pretraining --input 'corpus/*.txt' tfds:wikipedia/20230601.en:train \\
        --vocab spiece.model --output-dir data/pretrain --num-shards 64 --direct_num_workers 2

Options this command does not know go to Beam's `PipelineOptions` unchanged
(`--runner DataflowRunner --project ...`, `--direct_num_workers 2`). The job is
`xlnet_tf.beam.pretraining_data.prepare_pretraining_data`.
"""

import argparse
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.formats.pretraining_records import FORMAT
from xlnet_tf.beam.pipeline_input_error import PipelineInputError


def _parser():
    parser = CommandParser(
        prog="xlnet-tf prepare-pretraining",
        # Beam options pass through unknown; no abbreviation may capture one of them.
        allow_abbrev=False,
        # Options left out take the job function's defaults (one place for them).
        argument_default=argparse.SUPPRESS,
        description="Beam job: text files / TFDS corpora -> XLNet pretraining TFRecords (format "
        f"{FORMAT}). Unknown arguments go to Beam's PipelineOptions (e.g. --runner DataflowRunner "
        "--project ... or --direct_num_workers 2).",
    )
    parser.add_argument("--input", nargs="+", required=True,
                        help="text files or globs (local or gs://; one sentence per line, blank line between "
                        "documents) and/or tfds:NAME[:SPLIT]")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--vocab", required=True, help="spiece.model with XLNet's special ids")
    parser.add_argument("--num-shards", type=int, help="shard files to write (default 16)")
    parser.add_argument("--chunk-length", type=int,
                                help="tokens per record, not a model setting (default 512)")
    parser.add_argument("--seed", type=int, help="decides shard assignment and document order (default 0)")
    parser.add_argument("--lowercase", action="store_true", help="for uncased vocabularies")
    parser.add_argument("--keep-accents", action="store_true")
    parser.add_argument("--max-sentence-chars", type=int,
                                help="longer lines are split at spaces into sentences of at most this many "
                                "characters (default 4096)")
    parser.add_argument("--on-undecodable", choices=("skip", "replace"),
                                help="documents with non-UTF-8 bytes: skip them (counted, the default) or "
                                "replace the bytes with U+FFFD")
    parser.add_argument("--tfds-text-feature", help="TFDS feature holding the text (default text)")
    parser.add_argument("--tfds-data-dir")
    parser.add_argument("--tfds-download", action="store_true",
                                help="download_and_prepare TFDS inputs first")
    parser.add_argument("--tfds-read-shards", type=int,
                                help="read each TFDS split as this many even sub-splits, in parallel (default 1)")
    parser.add_argument("--read-range-bytes", type=int,
                        help="uncompressed input files larger than this are read as ranges of this many "
                        "bytes, on several workers (default 67108864, 64 MiB)")
    parser.add_argument("--shared-filesystem", action="store_true",
                        help="local paths are on a filesystem every worker mounts at the same place "
                        "(allows them with Dataflow, Flink, Spark)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards and manifest already in the output directory")
    return parser


def run(argv=None):
    """Parses `argv` and runs the job; returns its `JobResult(manifest, pipeline_result)`.

    Raises:
        PipelineInputError: a bad input, vocabulary or setting, before the pipeline starts.
    """
    # import time: Beam loads once the arguments are checked
    from xlnet_tf.beam.pretraining_data import prepare_pretraining_data

    args, beam_args = _parser().parse_known_args(argv)
    settings = vars(args)
    inputs = settings.pop("input")
    return prepare_pretraining_data(inputs, beam_args=beam_args, **settings)


def main(argv=None):
    """Entry point of `xlnet-tf prepare-pretraining`; returns the exit code."""
    try:
        manifest = run(argv).manifest
    except PipelineInputError as e:
        print(f"xlnet-tf prepare-pretraining: error: {e}", file=sys.stderr)
        return 2
    documents = manifest["documents"]
    print(
        f"Wrote {manifest['num_shards']} shard(s), {manifest['num_records']} records, {manifest['num_tokens']} "
        f"tokens. Documents: {documents['read']} read, {documents['written']} written, skipped "
        f"{documents['skipped']}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
