"""`xlnet-tf vocab`: train a SentencePiece vocabulary whose ids 0..8 are XLNet's special pieces.

Example:
    xlnet-tf vocab --input 'corpus/*.txt' --vocab-size 32000 --output spiece.model

The training is `xlnet_tf.tokenizer_training.train_vocabulary`; this module
parses the options and prints one summary line.
"""

import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.tokenizer_training import DEFAULT_EXTRA_SYMBOLS, VocabularyTrainingError, train_vocabulary


def _parser():
    parser = CommandParser(
        prog="xlnet-tf vocab",
        allow_abbrev=False,
        description="Train a unigram SentencePiece vocabulary whose ids 0..8 are XLNet's special pieces "
        "(<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>).",
    )
    parser.add_argument("--input", nargs="+", required=True, help="text files or globs (local or gs://); "
                        "one sentence per line, blank line between documents")
    parser.add_argument("--vocab-size", type=int, required=True, dest="vocab_size")
    parser.add_argument("--output", required=True, help="path of the spiece.model to write")
    parser.add_argument("--character-coverage", type=float, default=0.99995, dest="character_coverage")
    parser.add_argument("--input-sentence-size", type=int, default=10_000_000,
                                dest="input_sentence_size", help="sentences sampled for training; 0 = all")
    parser.add_argument("--no-shuffle", action="store_true", help="take the first sentences instead of sampling")
    parser.add_argument("--extra-symbols", default=" ".join(DEFAULT_EXTRA_SYMBOLS), dest="extra_symbols",
                                help="space-separated user-defined pieces after <eop> (default: the original's "
                                "punctuation); pass '' for none")
    parser.add_argument("--lowercase", action="store_true", help="uncased vocabulary")
    parser.add_argument("--keep-accents", action="store_true", dest="keep_accents")
    parser.add_argument("--max-sentence-chars", type=int, default=4096, dest="max_sentence_chars")
    parser.add_argument("--soft-vocab-limit", action="store_true",
                        help="allow a smaller vocabulary than asked when the corpus is too small")
    parser.add_argument("--num-threads", type=int, default=None, dest="num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    return parser


def main(argv=None):
    """Entry point of `xlnet-tf vocab`; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        result = train_vocabulary(
            args.input,
            args.vocab_size,
            args.output,
            character_coverage=args.character_coverage,
            input_sentence_size=args.input_sentence_size,
            shuffle_input_sentence=not args.no_shuffle,
            extra_symbols=tuple(args.extra_symbols.split()),
            lowercase=args.lowercase,
            keep_accents=args.keep_accents,
            max_sentence_chars=args.max_sentence_chars,
            hard_vocab_limit=not args.soft_vocab_limit,
            num_threads=args.num_threads,
            seed=args.seed,
            verbose=args.verbose,
        )
    except VocabularyTrainingError as e:
        print(f"xlnet-tf vocab: error: {e}", file=sys.stderr)
        return 2
    print(
        f"Wrote {result['path']}: {result['vocabulary_size']} pieces from {result['sentences']} sentences in "
        f"{len(result['files'])} file(s); {result['undecodable_lines']} undecodable line(s) skipped."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
