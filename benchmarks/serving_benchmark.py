"""Serving latency: our exported SavedModel next to Hugging Face's PyTorch XLNet, in the same run.

XLNet-Base size (12 layers, hidden 768, 12 heads, inner 3072, vocab 32000) sequence
classifier with random weights, sequence length 128 (--seq), batch 1 and 32 (--batches), on CPU.

Each measurement runs in a fresh subprocess that imports only what a server would:
  - `savedmodel ids`:     `tf.saved_model.load` + the `serve_token_ids` signature
                          (int32 ids in; what stock TF Serving runs);
  - `savedmodel strings`: the `serving_default` signature (raw strings in: UTF-8
                          repair, SentencePiece, XLNet packing and the model, all
                          in the graph);
  - `savedmodel short`:   `serving_default` on short texts (--short-words words, most of
                          the 128 positions padding: what `trim_padding` skips);
  - `savedmodel-bf16 ...`: the same signatures of the `dtype="bfloat16"` export
                          (bfloat16 variables and matmuls, float32 outputs);
  - `savedmodel-xla ...`: with --xla, the `jit_compile=True` export (the model call
                          XLA-compiled, padding not trimmed);
  - `pytorch ids`:        `transformers.XLNetForSequenceClassification` (eval, no grad, float32);
  - `pytorch strings`:    the Hugging Face tokenizer (Python, same SentencePiece
                          model, padding left, truncation to 128) + the same model;
  - `pytorch short`:      the short texts, padded to the batch's longest row (the
                          Hugging Face way to skip padding).
The SavedModel process imports tensorflow and tensorflow_text only (not xlnet_tf).
Both frameworks get the same thread counts (intra-op = --threads, inter-op = 1).
Inputs fill all positions (strings are long enough to be truncated), except the `short` rows.

Each ratio (`PAIRS`, --pairs picks some) is timed as its own pair of loaded
workers taking turns, one call at a time (`interleaved_steps`), so a change in
the machine's load hits both alike, and the pair runs twice: first worker
started first, then second. Latency is wall time per call after --warmup
calls. The ratio is the geometric mean over the two start orders of the median
same-round ratio (`balanced_ratio`): the worker started first ran 5-30% slow
on this VM for as long as it lived, and the two orders cancel that.

The SentencePiece model is the small test vocabulary (tests/testdata/tiny_spiece.model)
unless --spiece is given: the tokenizer's cost depends on the vocabulary, the
model's does not (its embedding table has 32000 rows either way).

Usage:
    python benchmarks/serving_benchmark.py [--seq 128] [--batches 1 32] [--iters 10] [--iters-32 3] [--warmup 2]
        [--threads N] [--short-words 16] [--xla] [--pairs ids strings/ids ...] [--keep DIR]
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time

# The script's own folder, not the repository: the serving workers must not find xlnet_tf.
from interleaved_steps import pair_summary, read_until, run_in_both_orders, serve, spawn
import measurement
import results_table

ROOT = measurement.REPO
BASE = measurement.XLNET_BASE
LENGTH = 128
BATCHES = (1, 32)
SHORT_WORDS = 16
EXPORTS = {"savedmodel": ("", {}), "savedmodel-bf16": ("_bf16", {"dtype": "bfloat16"}),
           "savedmodel-xla": ("_xla", {"jit_compile": True})}


def export_pairs(export, prefix, kinds):
    """An export's pairs, `{name: (numerator worker, denominator worker)}`, the numerator ours: each input
    kind against PyTorch's (`ids`, `bf16 ids`, ...), and its strings-in signature against its ids-in one."""
    pairs = {f"{prefix}{kind}": (f"{export} {kind}", f"pytorch {kind}") for kind in kinds}
    pairs[f"{prefix}strings/ids"] = (f"{export} strings", f"{export} ids")
    return pairs


# Each ratio is timed as its own pair of workers, in both start orders (`run_in_both_orders`):
# on this VM the worker started first ran 5-30% slow for as long as it lived.
PAIRS = {**export_pairs("savedmodel", "", ("ids", "strings", "short")),
         **export_pairs("savedmodel-bf16", "bf16 ", ("ids", "strings"))}
XLA_PAIRS = export_pairs("savedmodel-xla", "xla ", ("ids", "strings"))


def _texts(batch, num_words=None):
    """Long enough to be truncated at LENGTH, or `num_words` words each."""
    words = ("the quiet river runs past an old mill where children play and farmers talk about rain "
             "while the evening light falls over the hills").split()
    num_words = num_words or max(120, LENGTH)
    return [" ".join(words[(i + j) % len(words)] for j in range(num_words)) for i in range(batch)]


def _ids(batch, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    token_ids = rng.integers(10, BASE["vocabulary_size"], size=(batch, LENGTH)).astype(np.int32)
    token_ids[:, -2:] = [4, 3]  # <sep> <cls>
    segment_ids = np.zeros((batch, LENGTH), np.int32)
    segment_ids[:, -1] = 2
    return token_ids, segment_ids, np.ones((batch, LENGTH), np.int32)


def worker_export(args):
    sys.path.insert(0, ROOT)
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
    from xlnet_tf.serving.export_task_model import export_task_model
    from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    model = XLNetClassifier(XLNetBackbone(XLNetConfig(**BASE, dropout=0.0, attention_dropout=0.0)), num_classes=2)
    model.build_with_dummy_inputs()
    tokenizer = XLNetTokenizer(args.spiece)
    start = time.perf_counter()
    for export, (suffix, options) in EXPORTS.items():
        if export == "savedmodel-xla" and not args.xla:
            continue
        export_task_model(model, args.model_dir + suffix, task="classification", sequence_length=LENGTH,
                          preprocessor=TextPreprocessor(tokenizer, XLNetPacker(LENGTH)),
                          vocabulary=tokenizer.get_vocabulary(), label_names=["negative", "positive"],
                          overwrite=True, **options)
    return {"export_s": time.perf_counter() - start}


def worker_savedmodel(args, kind):
    import tensorflow_text  # noqa: F401  (SentencePiece ops of the strings-in signature)

    tf = measurement.limit_tensorflow_threads(args.threads)
    loaded = tf.saved_model.load(args.model_dir + EXPORTS[args.worker.split()[0]][0])
    if kind in ("strings", "short"):
        signature = loaded.signatures["serving_default"]
        text = tf.constant(_texts(args.batch, args.short_words if kind == "short" else None))
        call = lambda: signature(text=text)["probabilities"].numpy()  # noqa: E731
    else:
        signature = loaded.signatures["serve_token_ids"]
        ids, seg, mask = (tf.constant(x) for x in _ids(args.batch))
        call = lambda: signature(token_ids=ids, segment_ids=seg, padding_mask=mask)["probabilities"].numpy()  # noqa: E731
    return call


def worker_torch(args, kind):
    import transformers

    torch = measurement.limit_torch_threads(args.threads)
    config = measurement.hugging_face_config(BASE, dropout=0.0, num_labels=2)
    model = transformers.XLNetForSequenceClassification(config).eval()
    if kind in ("strings", "short"):
        tokenizer = transformers.XLNetTokenizer(vocab_file=args.spiece)
        texts = _texts(args.batch, args.short_words if kind == "short" else None)
        padding = "longest" if kind == "short" else "max_length"

        def call():
            with torch.no_grad():
                encoded = tokenizer(texts, padding=padding, truncation=True, max_length=LENGTH,
                                    return_tensors="pt")
                return torch.softmax(model(**encoded).logits, -1).numpy()
    else:
        ids, seg, mask = (torch.from_numpy(x.astype("int64")) for x in _ids(args.batch))

        def call():
            with torch.no_grad():
                return torch.softmax(model(input_ids=ids, token_type_ids=seg, attention_mask=mask).logits,
                                     -1).numpy()
    return call


def run_worker(args):
    """Export once, or serve timed calls: one line "call" on stdin -> one "TIME seconds" line."""
    try:
        if args.worker == "export":
            measurement.report(worker_export(args))
            return
        kind = args.worker.split()[1]
        if args.worker.startswith("savedmodel"):
            call = worker_savedmodel(args, kind)
        else:
            call = worker_torch(args, kind)
        for _ in range(args.warmup):
            call()
    except Exception as e:  # reported in the table, not fatal to the other rows
        measurement.report_error(e)
        return
    serve(call)


def _spawn(worker, args, batch=1):
    command = [sys.executable, os.path.abspath(__file__), "--worker", worker, "--model-dir", args.model_dir,
               "--spiece", args.spiece, "--batch", str(batch), "--warmup", str(args.warmup),
               "--threads", str(args.threads), "--seq", str(LENGTH), "--short-words", str(args.short_words)]
    if args.xla:
        command.append("--xla")
    # The serving processes must not find xlnet_tf: run them away from the repository.
    return spawn(command, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=tempfile.gettempdir())


def _pairs(args):
    pairs = dict(PAIRS, **(XLA_PAIRS if args.xla else {}))
    return {name: pairs[name] for name in (args.pairs or pairs)}


def measure(args, batch, pair, iters):
    """Times one pair's calls interleaved, in both start orders; returns the pair's result.

    Within a pass the two workers take turns, one call at a time, so a change in
    the machine's load hits both alike; the pass is then repeated with the other
    worker started first. The ratio is `balanced_ratio` over the two passes.
    """
    start = lambda worker: _spawn(worker, args, batch=batch)  # noqa: E731
    passes, failed = run_in_both_orders(start, pair, iters)
    if failed:
        return {"error": "; ".join(f"{worker}: {result.get('error', '')}" for worker, result in failed.items())}
    top, bottom = pair
    row = pair_summary(passes, top, bottom)
    if row is None:
        return {"error": "a worker died before its timed calls"}
    return dict(row, median_ms=[1000 * seconds for seconds in row["medians"]],
                calls=sum(len(times[top]) for times in passes))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, default=128, help="sequence length (128 or 512)")
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES), help="batch sizes")
    parser.add_argument("--iters", type=int, default=10, help="timed calls per worker and start order at batch 1")
    parser.add_argument("--iters-32", type=int, default=3,
                        help="timed calls per worker and start order at larger batches")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--spiece", default=os.path.join(ROOT, "tests", "testdata", "tiny_spiece.model"))
    parser.add_argument("--short-words", type=int, default=SHORT_WORDS, help="words per short text")
    parser.add_argument("--xla", action="store_true", help="also export and time jit_compile=True")
    parser.add_argument("--pairs", nargs="+", default=None, choices=list(PAIRS) + list(XLA_PAIRS),
                        help="the pairs to time (default: all; the xla ones need --xla)")
    parser.add_argument("--keep", default=None, help="export the SavedModel here (kept) instead of a temp dir")
    results_table.add_arguments(parser)
    args = parser.parse_args()
    needs_xla = [name for name in args.pairs or () if name in XLA_PAIRS]
    if needs_xla and not args.xla:
        parser.error(f"--pairs {' '.join(repr(n) for n in needs_xla)}: these time the XLA export; add --xla")
    global LENGTH
    LENGTH = args.seq
    if args.worker:
        run_worker(args)
        return 0

    workdir = tempfile.mkdtemp(prefix="xlnet_serving_bench_")
    args.model_dir = args.keep or os.path.join(workdir, "model")
    export = _spawn("export", args)
    line = read_until(export, (measurement.RESULT,))
    export.wait()
    exported = json.loads(line[len(measurement.RESULT):])
    if "error" in exported:
        print(f"export failed: {exported['error']}")
        return 1
    load_start = os.getloadavg()[0]
    print(f"XLNet-Base sequence classifier (12 x 768, vocab 32000), random weights, seq {LENGTH}, CPU, "
          f"{args.threads} thread(s); exports took {exported['export_s']:.1f} s")
    print("ratio: latency of the first worker / the second, the geometric mean over the two start orders "
          "of the median same-round ratio; by order: each order's figure, first worker started first, then second")
    print()
    print("| batch | pair | first worker | second worker | ratio | by order | median ms (first / second) | calls |")
    print("|---|---|---|---|---|---|---|---|")
    for batch in args.batches:
        for name, pair in _pairs(args).items():
            result = measure(args, batch, pair, args.iters if batch == 1 else args.iters_32)
            if "error" in result:
                print(f"| {batch} | {name} | {pair[0]} | {pair[1]} | failed: {result['error'][-200:]} | | | |",
                      flush=True)
                continue
            by_order = " / ".join(f"{r:.2f}x" for r in result["by_order"])
            medians = " / ".join(f"{ms:.1f}" for ms in result["median_ms"])
            print(f"| {batch} | {name} | {pair[0]} | {pair[1]} | **{result['ratio']:.2f}x** | {by_order} | "
                  f"{medians} | {result['calls']} |", flush=True)
    print(f"\nload average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    return 0


def result_rows(section):
    """RESULTS.md rows: latency ratios of the like-for-like pairs (the `short` pairs are not like for like)."""
    if "pair" not in section.header or "ratio" not in section.header:
        return []
    seq = re.search(r"\bseq (\d+)", section.context)
    rows = []
    for cells in section.rows:
        if "short" in cells["pair"] or "failed" in cells["ratio"]:
            continue
        peer = "pytorch" in cells["second worker"]
        rows.append(results_table.Row(
            f"serving latency, XLNet-Base classifier, seq {seq.group(1) if seq else LENGTH}, batch {cells['batch']}: "
            f"{cells['first worker']} / {cells['second worker']}",
            "Hugging Face PyTorch" if peer else cells["second worker"], results_table.number(cells["ratio"]), "time"))
    return rows


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
