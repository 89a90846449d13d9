"""Preprocessing throughput: the Beam pretraining job vs raw SentencePiece encode.

Measures, in one run on the same text:
- raw: `sentencepiece` encoding every non-blank line of the corpus file in memory, one
  thread, one call (the ceiling for this stage: the job's real work is this encode). Both
  sides encode the same lines with the same vocabulary (SentencePiece's own normalization
  runs in both); the job's extra work -- reading, XLNet's normalization (a no-op on this
  ASCII text apart from whitespace handling), the digit-comma rule, hashing, shuffling,
  serializing and writing -- all counts against it;
- the Beam job (`xlnet_tf.beam.pretraining_data`) end to end on the FnApiRunner (named,
  so a new default of Beam's DirectRunner cannot change what is measured) with 1 worker
  (in-process) and 2 worker processes: read, normalize, encode, shuffle, sort, serialize, write.
  With 2 workers the corpus file is read in 4 byte ranges, so both workers tokenize.

Tokens/s for the job = tokens SentencePiece produced (written tokens less one
`<eod>` per document) / time. CPU time is the launching process's (all its
threads) plus that of its reaped child processes (`RUSAGE_CHILDREN`: the Beam
worker processes, waited for before reading it). End-to-end figures include
fixed costs (pipeline construction, each worker process starting and importing
Beam, NumPy and SentencePiece -- no TensorFlow: workers write TFRecords
themselves); the "marginal" rate divides the extra tokens of the larger corpus
by the extra time, which is what a long job converges to (at terabyte scale
the fixed seconds per worker vanish). The fixed cost itself is measured as the
CPU seconds of the job on a one-document corpus, per worker count. The target
is >= 0.8x the raw rate in CPU tokens/s, at 1 and 2 workers.

The corpus is synthetic (pseudo-words drawn with a Zipf law, sentences of
5..30 words, documents of 10..60 sentences, roughly Wikipedia-article sized);
pass --vocab to use a real spiece.model (the text is then mostly split into
characters and short pieces, which is slower for both sides alike).

    python benchmarks/preprocessing_benchmark.py [--megabytes 24] [--vocab spiece.model]
"""

import argparse
import os
import resource
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import results_table  # noqa: E402


def _pseudo_words(rng, count):
    syllables = ["ka", "lo", "mi", "ren", "tas", "vo", "pel", "dri", "nu", "sho", "ter", "gan", "bi", "quo", "fa",
                 "zel", "mor", "ith", "ul", "pra", "sen", "dak", "e", "a", "o", "in", "ar", "est"]
    words = set()
    while len(words) < count:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def write_corpus(path, megabytes, seed=0):
    """Writes about `megabytes` MB of synthetic documents; returns the number of documents."""
    rng = random.Random(seed)
    words = _pseudo_words(rng, 6000)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    target = int(megabytes * 1e6)
    written, documents = 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            sentences = []
            for _ in range(rng.randint(10, 60)):
                sentence = " ".join(rng.choices(words, weights, k=rng.randint(5, 30)))
                sentences.append(sentence[0].upper() + sentence[1:] + rng.choice((".", ".", "?", "!")))
            block = "\n".join(sentences) + "\n\n"
            f.write(block)
            written += len(block)
            documents += 1
    return documents


def raw_encode_rate(corpus, vocab, repeats):
    """Tokens/s of one-thread `sentencepiece` encode over the corpus's lines (best of `repeats`)."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=vocab)
    with open(corpus, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line]
    best, best_cpu, tokens = float("inf"), float("inf"), 0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        ids = processor.encode(lines, num_threads=1)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        tokens = sum(len(x) for x in ids)
    return tokens, best, best_cpu


def _wait_for_children(timeout=30.0):
    """Waits until the Beam worker processes have exited (and been reaped), so their CPU time is counted."""
    if not os.path.isdir("/proc"):
        return
    me = str(os.getpid())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = 0
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        children += f.read().rsplit(")", 1)[1].split()[1] == me
                except OSError:
                    pass
        if not children:
            return
        time.sleep(0.1)


def _cpu_seconds():
    """CPU time of this process plus its finished children (the Beam worker processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def beam_run(corpus, vocab, workers, num_shards):
    from xlnet_tf.cli import prepare_pretraining

    output_dir = tempfile.mkdtemp(prefix="xlnet_bench_")
    argv = ["--input", corpus, "--vocab", vocab, "--output-dir", output_dir, "--num-shards", str(num_shards)]
    if workers > 1:
        argv += ["--runner", "FnApiRunner", "--direct_num_workers", str(workers),
                 "--direct_running_mode", "multi_processing",
                 # Ranges, so that one file's tokenizing spreads over the workers.
                 "--read-range-bytes", str(os.path.getsize(corpus) // (2 * workers) + 1)]
    else:
        argv += ["--runner", "FnApiRunner", "--direct_running_mode", "in_memory"]
    start, start_cpu = time.perf_counter(), _cpu_seconds()
    manifest = prepare_pretraining.run(argv).manifest
    seconds = time.perf_counter() - start
    _wait_for_children()
    cpu_seconds = _cpu_seconds() - start_cpu
    shutil.rmtree(output_dir)
    # Tokens SentencePiece produced: written tokens minus one <eod> per document.
    encoded = manifest["num_tokens"] - manifest["documents"]["written"]
    return encoded, seconds, cpu_seconds


def _scaled(extra_seconds, tokens, extra_tokens):
    return extra_seconds * tokens / extra_tokens if extra_seconds > 0 else None


def _rate_cells(tokens, seconds, reference, divisor):
    """`tokens/s` and its ratio to `reference` (divided by `divisor`) as two table cells, n/a when unmeasurable."""
    if seconds is None:
        return "n/a | n/a"
    rate = tokens / seconds
    return f"{rate:,.0f} | {rate / reference / divisor:.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=24.0, help="size of the large corpus (the small one is 1/4)")
    parser.add_argument("--vocab", default=None, help="spiece.model (default: train a 4000-piece one on the corpus)")
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--num_shards", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="raw encode repeats (best is kept)")
    parser.add_argument("--beam_repeats", type=int, default=2, help="Beam runs per corpus and worker count (best kept)")
    results_table.add_arguments(parser)
    args = parser.parse_args(argv)

    import logging

    logging.getLogger().setLevel(logging.ERROR)
    import tensorflow  # noqa: F401  (imported up front so no run pays for it)

    from xlnet_tf.tokenizer_training import train_vocabulary

    workdir = tempfile.mkdtemp(prefix="xlnet_bench_corpus_")
    large = os.path.join(workdir, "large.txt")
    small = os.path.join(workdir, "small.txt")
    tiny = os.path.join(workdir, "tiny.txt")
    write_corpus(large, args.megabytes, seed=0)
    write_corpus(small, args.megabytes / 4, seed=1)
    write_corpus(tiny, 1e-6, seed=2)  # one document: what a run costs besides its text
    vocab = args.vocab
    if vocab is None:
        vocab = os.path.join(workdir, "spiece.model")
        train_vocabulary(small, args.vocab_size, vocab, input_sentence_size=200_000, num_threads=2,
                         hard_vocab_limit=False)

    raw_tokens, raw_seconds, raw_cpu = raw_encode_rate(large, vocab, args.repeats)
    rows = []
    for workers in (1, 2):
        best = {"small": (float("inf"), float("inf")), "large": (float("inf"), float("inf"))}
        tokens = {}
        best["tiny"] = (float("inf"), float("inf"))
        for _ in range(args.beam_repeats):
            for name, corpus in (("tiny", tiny), ("small", small), ("large", large)):
                tokens[name], seconds, cpu = beam_run(corpus, vocab, workers, args.num_shards)
                best[name] = (min(best[name][0], seconds), min(best[name][1], cpu))
        extra_tokens = tokens["large"] - tokens["small"]
        rows.append({
            "workers": workers,
            "tokens": tokens["large"],
            "seconds": best["large"][0],
            "cpu": best["large"][1],
            # None when the larger corpus did not take longer: the machine's noise swamped the difference.
            "marginal_seconds": _scaled(best["large"][0] - best["small"][0], tokens["large"], extra_tokens),
            "marginal_cpu": _scaled(best["large"][1] - best["small"][1], tokens["large"], extra_tokens),
            "fixed_seconds": best["tiny"][0],
            "fixed_cpu": best["tiny"][1],
        })
    shutil.rmtree(workdir)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"corpus: {args.megabytes:g} MB synthetic text (+ a {args.megabytes / 4:g} MB one for marginal rates), "
          f"{raw_tokens} tokens; vocab {os.path.basename(vocab)}; {os.cpu_count()} CPUs, load average {load:.1f}")
    print("wall = tokens / wall seconds; cpu = tokens / CPU seconds of every process of the run (robust to other "
          "load on the machine); marginal = extra tokens / extra time, large vs small corpus")
    print()
    print("| pipeline | tokens | wall s | wall tok/s | x raw/wkr | cpu tok/s | x raw |")
    print("|---|---|---|---|---|---|---|")
    raw_wall, raw_cpu_rate = raw_tokens / raw_seconds, raw_tokens / raw_cpu
    print(f"| raw sentencepiece encode, 1 thread | {raw_tokens} | {raw_seconds:.2f} | {raw_wall:,.0f} | 1.00 | "
          f"{raw_cpu_rate:,.0f} | 1.00 |")
    for row in rows:
        workers = row["workers"]
        label = f"Beam FnApiRunner, {workers} worker{'s' if workers > 1 else ''}"
        for kind, seconds, cpu in (("end to end", row["seconds"], row["cpu"]),
                                   ("marginal", row["marginal_seconds"], row["marginal_cpu"])):
            shown_tokens = row["tokens"] if kind == "end to end" else ""
            shown_seconds = f"{seconds:.2f}" if kind == "end to end" else ""
            print(f"| {label}, {kind} | {shown_tokens} | {shown_seconds} | "
                  f"{_rate_cells(row['tokens'], seconds, raw_wall, workers)} | "
                  f"{_rate_cells(row['tokens'], cpu, raw_cpu_rate, 1)} |")
    print()
    print("Fixed cost: the job on a one-document corpus (process start, imports, pipeline construction, "
          "worker start).")
    print()
    print("| workers | fixed wall s | fixed CPU s | raw encode CPU s of the large corpus |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['workers']} | {row['fixed_seconds']:.2f} | {row['fixed_cpu']:.2f} | {raw_cpu:.2f} |")
    return 0


def result_rows(section):
    """RESULTS.md rows: the Beam job's CPU tokens/s over raw SentencePiece encoding, per worker count."""
    if "x raw" not in section.header:
        return []
    return [results_table.Row(f"Beam pretraining job, {cells['pipeline']}: CPU tokens/s / raw encoding",
                              "raw SentencePiece, 1 thread", results_table.number(cells["x raw"]), "speed")
            for cells in section.rows if cells["pipeline"].startswith("Beam") and cells["x raw"] != "n/a"]


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
