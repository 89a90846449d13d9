"""`xlnet-tf quickstart`: the whole main job in one offline command.

    pip install ".[beam]" && xlnet-tf quickstart

1. corpus: by default the English docstrings of the installed Python standard
   library (`xlnet_tf.builtin_corpus`); or `--input FILES` / `--input tfds:NAME`;
2. vocabulary: what `xlnet-tf vocab` runs, `train_vocabulary` (SentencePiece unigram with
   XLNet's special ids);
3. records: what `xlnet-tf prepare-pretraining` runs, the Beam job's
   `prepare_pretraining_data` (DirectRunner);
4. pretraining: the tiny model of `configs/pretrain/tiny.yaml` (`--config tiny`) for `--minutes`
   on this machine's CPU, printing the loss as it falls and drawing it into `pretrain/loss.png`
   (next to TensorBoard's `pretrain/logs/`) against uniform guessing and a model that ignores context;
5. export: a preset directory and a SavedModel (with a `generate` signature); then what the
   model learned: masked-word guesses and continuations of held-out sentence beginnings.

`--backend jax` (or `torch`) pretrains on that Keras backend instead of TensorFlow
(`xlnet_tf.backend_selection`); the data stages are TensorFlow and Beam on every backend.

Every stage is skipped when its output already exists, so running the command
again after an interruption continues where it stopped. With the output sent to a
file, progress is one plain line per 10 steps (`xlnet_tf.cli.plain_progress`).

The tiny config departs from the paper's objective to learn within minutes on a CPU
(`configs/pretrain/tiny.yaml` names each departure and its reason): for example its
masked words' pieces are predicted in reading order (`data.spans_in_reading_order: true`).
"""

import json
import os
import shlex
import sys
import time
import sentencepiece as spm

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.plain_progress import progress_overrides, run_progress_callbacks
from xlnet_tf.cli.run_arguments import add_backend_argument, apply_backend
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.training.shipped_configs import resolve_config
from xlnet_tf.formats.pretraining_records import MANIFEST_FILE as RECORDS_MANIFEST_FILE
from xlnet_tf.formats.preset_files import VOCABULARY_FILE
from xlnet_tf.builtin_corpus import write_builtin_corpus
from xlnet_tf.tokenizer_training import VocabularyTrainingError, train_vocabulary
from xlnet_tf.beam.pipeline_input_error import PipelineInputError

DEFAULT_WORKDIR = "xlnet_quickstart"
# The shipped pretraining config the quick start trains with.
RUN_CONFIG = "tiny"


def _stage(title):
    print(f"\n=== {title}", flush=True)


def _parser():
    parser = CommandParser(prog="xlnet-tf quickstart", description=(
        "Train a vocabulary, prepare records, pretrain a tiny XLNet for a few minutes and export "
        "it, offline. The default corpus is the English documentation of the installed Python "
        "standard library."))
    parser.add_argument("--workdir", default=DEFAULT_WORKDIR,
                        help="where every stage writes (corpus/, spiece.model, records/, pretrain/); running "
                             "again with the same directory continues where it stopped")
    parser.add_argument("--input", nargs="+", default=None,
                        help="text files/globs (one sentence per line, blank line between "
                             "documents) or tfds:NAME; default: Python's own docstrings")
    parser.add_argument("--minutes", type=float, default=4.0,
                        help="pretraining time budget in minutes, checked at each epoch end (100 steps); "
                             "the run also stops at the tiny config's training.train_steps")
    parser.add_argument("--vocab-size", type=int, default=4000,
                        help="SentencePiece pieces to train (the model's vocabulary size follows it)")
    parser.add_argument("--corpus-mb", type=float, default=4.0,
                        help="size of the built-in corpus in MB")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="SECTION.KEY=VALUE",
                        help="override one setting of the tiny run config (configs/pretrain/tiny.yaml; "
                             "`xlnet-tf pretrain --config tiny --print-config` lists them); repeatable")
    add_backend_argument(parser)
    return parser


def time_budget(seconds):
    """A callback that stops `fit` at the first epoch end after `seconds` of training.

    Stopping at an epoch end keeps the BackupAndRestore state consistent, so running
    the quick start again continues the same run.
    """
    import keras  # import time: `--help` and argument errors answer without TensorFlow

    class TimeBudget(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.start = time.time()

        def on_epoch_end(self, epoch, logs=None):
            if time.time() - self.start > seconds:
                self.model.stop_training = True

    return TimeBudget()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    # Before any stage: the Beam job and the pretraining import Keras, which fixes its backend then.
    code = apply_backend(args, [resolve_config(RUN_CONFIG, "pretrain")], "quickstart")
    if code is not None:
        return code
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    started = time.time()
    try:
        inputs, heldout = _corpus_stage(args, workdir)
        vocabulary = _vocabulary_stage(args, workdir, inputs)
        vocabulary_size = spm.SentencePieceProcessor(model_file=vocabulary).get_piece_size()
        records = _records_stage(workdir, inputs, vocabulary)
        run_dir = os.path.join(workdir, "pretrain")
        summary, context_free = _pretraining_stage(args, run_dir, records, vocabulary, vocabulary_size)
    except (VocabularyTrainingError, PipelineInputError, ConfigError) as e:
        # A corpus SentencePiece cannot train on, a bad input, a bad --set or a work directory of another run.
        print(f"xlnet-tf quickstart: error: {e}", file=sys.stderr)
        return 2
    _export_stage(summary, run_dir)
    _report(summary, run_dir, context_free, vocabulary, vocabulary_size, heldout)
    print(f"Done in {(time.time() - started) / 60:.1f} minutes. Work directory: {workdir}")
    print(f"Next: {next_command(run_dir, records, vocabulary, vocabulary_size, args.overrides, args.backend)}"
          "   (continues this run)")
    return 0


def _corpus_stage(args, workdir):
    """Stage 1: `(inputs, heldout)`, `--input`'s files, or the built-in corpus written once with its held-out text."""
    if args.input:
        return args.input, None
    corpus = os.path.join(workdir, "corpus", "python_docstrings.txt")
    heldout = os.path.join(workdir, "corpus", "heldout.txt")
    if not os.path.exists(corpus):
        _stage("1/5 corpus: English docstrings of the installed Python standard library")
        os.makedirs(os.path.dirname(corpus), exist_ok=True)
        documents, sentences, size = write_builtin_corpus(
            corpus + ".partial", max_bytes=int(args.corpus_mb * 1e6),
            heldout_path=heldout + ".partial")
        os.replace(heldout + ".partial", heldout)  # Held out first: corpus marks completion.
        os.replace(corpus + ".partial", corpus)
        print(f"{documents} documents, {sentences} sentences, {size / 1e6:.1f} MB -> {corpus}")
    return [corpus], heldout


def _vocabulary_stage(args, workdir, inputs):
    """Stage 2: the SentencePiece model's path, trained unless it exists; raises `VocabularyTrainingError`."""
    vocabulary = os.path.join(workdir, VOCABULARY_FILE)
    vocab_inputs = [i for i in inputs if not i.startswith("tfds:")]
    if not os.path.exists(vocabulary):
        _stage(f"2/5 vocabulary: SentencePiece unigram, {args.vocab_size} pieces")
        if not vocab_inputs:
            # A TFDS-only run trains its vocabulary on the records' source text dumped first.
            vocab_inputs = [_dump_tfds_text(inputs, os.path.join(workdir, "corpus"))]
        trained = train_vocabulary(vocab_inputs, args.vocab_size, vocabulary)
        print(f"{trained['vocabulary_size']} pieces from {trained['sentences']} sentences -> {vocabulary}")
    return vocabulary


def _records_stage(workdir, inputs, vocabulary):
    """Stage 3: the pretraining records' directory, written unless complete; raises `PipelineInputError`."""
    records = os.path.join(workdir, "records")
    if not os.path.exists(os.path.join(records, RECORDS_MANIFEST_FILE)):
        _stage("3/5 records: xlnet-tf prepare-pretraining (Beam DirectRunner)")
        # import time: Beam loads at its stage, after the vocabulary
        from xlnet_tf.beam.pretraining_data import prepare_pretraining_data

        job = prepare_pretraining_data(inputs, records, vocabulary, num_shards=2, chunk_length=512,
                                       overwrite=True)
        documents = job.manifest["documents"]
        print(f"{documents['written']} of {documents['read']} documents written (skipped "
              f"{documents['skipped']})")
    with open(os.path.join(records, RECORDS_MANIFEST_FILE)) as f:
        manifest = json.load(f)
    print(f"records: {manifest['num_tokens']} tokens in {manifest['num_shards']} shards")
    return records


def _pretraining_stage(args, run_dir, records, vocabulary, vocabulary_size):
    """Stage 4: the tiny run for at most `--minutes`; `(run summary, context-free loss)`; raises `ConfigError`."""
    _stage(f"4/5 pretraining the tiny XLNet (its configured steps, at most {args.minutes:g} minutes)")
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.pretraining.learning_report import context_free_entropy
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.pretraining.pretraining_config import load_run_config
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.pretraining.pretraining_run import run_pretraining

    progress = progress_overrides(args.overrides)
    config = load_run_config([resolve_config(RUN_CONFIG, "pretrain")], [
        f"data.train_files={records}", f"data.vocabulary={vocabulary}",
        f"model.vocabulary_size={vocabulary_size}", "distribution.strategy=one_device",
    ] + list(args.overrides) + progress)
    # A pass over the quick start's small records: the context-free line of loss.png and of the summary.
    context_free = context_free_entropy(records)
    callbacks = [time_budget(args.minutes * 60)] + run_progress_callbacks(config, progress)
    summary = run_pretraining(config, run_dir, extra_callbacks=callbacks, context_free_loss=context_free)
    return summary, context_free


def _export_stage(summary, run_dir):
    """Stage 5: a preset directory and a SavedModel of the trained model, into `summary["export"]`."""
    _stage("5/5 export")
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.serving.export_pretrained import export_pretrainer

    summary["export"] = export_pretrainer(summary["pretrainer"], os.path.join(run_dir, "export"),
                                          vocabulary=summary["vocabulary"], overwrite=True)
    for key, path in summary["export"].items():
        print(f"{key}: {path}")


def _report(summary, run_dir, context_free, vocabulary, vocabulary_size, heldout):
    """The loss from the first logged step to the last, and what the model learned (when a step was logged)."""
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.training.callbacks import read_metrics

    lines = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    if not lines:
        return
    first, last = lines[0], lines[-1]
    print(f"\nloss {first['loss']:.3f} at step {first['step']} -> {last['loss']:.3f} at step "
          f"{last['step']} (accuracy {first['accuracy']:.3f} -> {last['accuracy']:.3f}).")
    print(f"loss curve: {summary['loss_curve']}")
    show_what_was_learned(last["loss"], context_free, vocabulary, vocabulary_size,
                          summary.get("export", {}).get("preset"), heldout)


def show_what_was_learned(loss, context_free, vocabulary, vocabulary_size, preset, heldout,
                          num_sentences=6):
    """Prints the loss against the context-free and uniform figures, masked-word guesses, continuations.

    `context_free` is `context_free_entropy` of the run's records.

    The guesses and the continued beginnings are of sentences of `heldout` (never trained on)
    when there is one.
    """
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.pretraining.learning_report import (describe_loss, format_continuations, format_predictions,
                                                      masked_word_predictions, sentence_continuations)

    print(describe_loss(loss, context_free, vocabulary_size))
    if not preset or not heldout or not os.path.exists(heldout):
        return
    # import time: TensorFlow loads at the pretraining stage
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    with open(heldout, encoding="utf-8") as f:
        documents = f.read().split("\n\n")
    # One sentence from each of the first documents, for variety.
    sentences = [next((line for line in d.splitlines() if 40 <= len(line) <= 160), None) for d in documents]
    sentences = [s for s in sentences if s][:num_sentences]
    processor = spm.SentencePieceProcessor(model_file=vocabulary)
    # bi_data reads half of each batch as backward text; inference wants forward positions only.
    pretrainer = XLNetPretrainer.from_preset(preset, bi_data=False, memory_length=0, reuse_length=0)
    results = masked_word_predictions(pretrainer, processor, sentences)
    if results:
        print("\nWhat it learned: one word of each held-out sentence masked, the model's top guesses:")
        print("\n".join(format_predictions(results)))
    if sentences:
        # import time: TensorFlow loads at the pretraining stage
        from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM

        causal_lm = XLNetCausalLM.from_preset(preset, mode="exact")
        print("\nAnd how it continues the beginnings of two held-out sentences (greedy, exact mode):")
        print("\n".join(format_continuations(sentence_continuations(causal_lm, sentences[:2]))))


def next_command(run_dir, records, vocabulary, vocabulary_size, overrides=(), backend=None):
    """The `xlnet-tf pretrain` command that continues the quick start's run, from any directory.

    The config is named (`tiny`, shipped with the package, the file this run used)
    and every path is absolute; `backend`, the quick start's `--backend`, is passed on.
    """
    sets = [f"data.train_files={os.path.abspath(records)}",
            f"model.vocabulary_size={vocabulary_size}",
            f"data.vocabulary={os.path.abspath(vocabulary)}", *overrides]
    words = ["xlnet-tf", "pretrain", "--config", RUN_CONFIG, "--workdir", os.path.abspath(run_dir),
             "--strategy", "one_device"]
    if backend:
        words += ["--backend", backend]
    for value in sets:
        words += ["--set", value]
    return shlex.join(words)


def _dump_tfds_text(inputs, directory):
    """Writes the first ~20 MB of the TFDS corpora's text for vocabulary training."""
    import tensorflow_datasets as tfds  # import time: it takes seconds; only `--tfds` corpora need it

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "tfds_text.txt")
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for name in inputs:
            dataset = tfds.load(name[len("tfds:"):], split="train")
            for example in tfds.as_numpy(dataset):
                text = example["text"].decode("utf-8", "replace")
                out.write(text.strip() + "\n\n")
                written += len(text)
                if written > 20_000_000:
                    return path
    return path


if __name__ == "__main__":
    sys.exit(main())
