"""Long documents with recurrence memory: ours next to Hugging Face's PyTorch XLNet, in the same run.

A document of T tokens is read as S = T / 512 consecutive segments of 512 tokens,
each attending to the memory the previous segments left (memory_length 512,
reuse_length 0 = the whole segment is cached), and the last segment's
`sequence_output` is the result, the path a long-document classifier takes:
  - ours: `xlnet_tf.models.segment_recurrence.last_segment_output(backbone,
    features)` on `[1, S, 512]` features (its `tf.while_loop` over the segments)
    inside one `tf.function`, and again with `jit_compile=True` (XLA);
  - peer: `transformers.XLNetModel` (same config: `mem_len`, `reuse_len`,
    `attn_type="bi"`), a Python loop over the S segments passing each call's
    `mems` to the next, `torch.no_grad()`, float32.
XLNet-Base shapes (12 layers, hidden 768, 12 heads, inner 3072, vocab 32000) with
random weights (speed and memory do not depend on the values), batch 1, float32,
inference, CPU, the same intra-op thread count on both sides (inter-op 1; PyTorch
with OMP_WAIT_POLICY=PASSIVE, as the other benchmarks). Token ids are random,
every position is real (no padding), segment ids 0.

Each (implementation, length) runs in a fresh subprocess, so its peak RSS
(`ru_maxrss`) is its own; "model+run" memory is that peak minus the peak right
after the framework's imports (TensorFlow's runtime alone is a few hundred MB
larger than PyTorch's, which would otherwise decide the ratio). Each process
first warms up on a 2-segment document (ours: traces the `tf.function`, whose
segment axis is dynamic, so the same graph then serves S segments; XLA compiles
per shape, so its warm-up is the full document, compilation included), then times
--repeats full documents (default 1: a long document already averages over its
segments); the fastest counts (load from other jobs only slows a pass down).
PyTorch runs before and after ours at every length and its faster run counts, so
by default it gets two timed passes to ours' one: any bias favours the peer.
The defaults should take 7-10 minutes on 2 cores (estimated from 2- and 16-segment
timings at load average 2-6: about 3.5 s per Base segment on either side).

Figures: tokens/s (T / fastest pass), seconds per segment (fastest pass / S),
peak and model+run memory, ours / PyTorch ratios, and per implementation two
linearity figures between the shortest and longest length: time ratio / length
ratio (1.0 = cost linear in length) and the growth of model+run memory (0 = flat).
The first segment of a PyTorch document has no memory yet (it attends to 512
keys, later ones to 1024), so a 1-segment PyTorch document is cheaper per
segment; ours attends to a fully masked zero memory from the first segment on.

Usage:
    python benchmarks/long_document_benchmark.py [--lengths 512 2048 8192] [--repeats 1] [--threads 2]
        [--impls torch ours ours_xla] [--quick] [--output benchmarks/long_document_benchmark_results.txt]

`--quick`: a tiny model (2 layers, hidden 64) with the same segment and memory
lengths, by default at 512 and 2048 tokens without the XLA row: a smoke run of the
whole pipeline (about half a minute on quiet cores; its speed figures mean nothing).
"""

import argparse
import os
import sys
import time

if __package__:  # imported as benchmarks.NAME, as the tests do
    from benchmarks import measurement, results_table
else:  # run as a script: its own folder is on sys.path
    import measurement
    import results_table

SIZES = {
    "base": measurement.XLNET_BASE,
    "tiny": dict(vocabulary_size=1000, num_layers=2, num_heads=2, head_dim=32, hidden_dim=64,
                 intermediate_dim=128),
}
SEGMENT_LENGTH = 512
MEMORY_LENGTH = 512
IMPLEMENTATIONS = ("torch", "ours", "ours_xla")
LABELS = {"torch": "HF PyTorch, mems loop", "ours": "ours tf.function", "ours_xla": "ours tf.function+XLA"}
WARMUP_SEGMENTS = 2


def document(num_segments, segment_length, vocabulary_size, seed=0):
    """Identical numpy features for both sides: `[1, S, L]` int32, every position real."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (1, num_segments, segment_length)
    return {"token_ids": rng.integers(10, vocabulary_size, size=shape).astype(np.int32),
            "segment_ids": np.zeros(shape, np.int32),
            "padding_mask": np.ones(shape, np.int32)}


def _peak_rss_mib():
    return measurement.peak_rss_bytes() / 2**20


def _timed_passes(run, warmup_features, features, repeats):
    """(first-call seconds, timed pass seconds): one warm-up call, then `repeats` timed ones."""
    [first] = measurement.time_calls(lambda: run(warmup_features), 1)
    return first, measurement.time_calls(lambda: run(features), repeats)


def worker_torch(spec):
    import transformers

    import_rss = _peak_rss_mib()
    torch = measurement.limit_torch_threads(spec["threads"])
    config = measurement.hugging_face_config(SIZES[spec["size"]], mem_len=spec["memory_length"], reuse_len=None,
                                         attn_type="bi", dropout=0.0)
    model = transformers.XLNetModel(config).eval()

    def run(features):
        ids, segments, mask = (torch.from_numpy(features[k]).long()
                               for k in ("token_ids", "segment_ids", "padding_mask"))
        mems = None
        with torch.no_grad():
            for index in range(ids.shape[1]):
                out = model(input_ids=ids[:, index], token_type_ids=segments[:, index],
                            attention_mask=mask[:, index].float(), mems=mems, use_mems=True)
                mems = out.mems
        return out.last_hidden_state  # [1, L, H]

    features = document(spec["segments"], spec["segment_length"], config.vocab_size)
    warmup = {k: v[:, :WARMUP_SEGMENTS] for k, v in features.items()}  # [1, 2, L]
    first, passes = _timed_passes(run, warmup, features, spec["repeats"])
    return dict(first_s=first, passes=passes, import_rss=import_rss,
                version=f"torch {torch.__version__} / transformers {transformers.__version__}")


def worker_ours(spec):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    tf = measurement.limit_tensorflow_threads(spec["threads"])
    import keras

    from xlnet_tf.models.segment_recurrence import last_segment_output
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig

    import_rss = _peak_rss_mib()
    keras.utils.set_random_seed(0)
    size = SIZES[spec["size"]]
    config = XLNetConfig(**size, activation="gelu", dropout=0.0, attention_dropout=0.0,
                         memory_length=spec["memory_length"], reuse_length=0)
    backbone = XLNetBackbone(config)
    length = spec["segment_length"]
    signature = {k: tf.TensorSpec([1, None, length], tf.int32)
                 for k in ("token_ids", "segment_ids", "padding_mask")}  # [1, S, L], S dynamic

    @tf.function(input_signature=[signature], jit_compile=spec["xla"])
    def forward(features):
        return last_segment_output(backbone, features, training=False)  # [1, L, H]

    def run(features):
        return forward(features).numpy()

    features = document(spec["segments"], length, size["vocabulary_size"])
    # XLA compiles per concrete shape: only a warm-up on the full document compiles the timed program.
    warmup = features if spec["xla"] else {k: v[:, :WARMUP_SEGMENTS] for k, v in features.items()}
    first, passes = _timed_passes(run, warmup, features, spec["repeats"])
    return dict(first_s=first, passes=passes, import_rss=import_rss,
                version=f"tensorflow {tf.__version__} / keras {keras.__version__}")


def child(spec):
    result = worker_torch(spec) if spec["impl"] == "torch" else worker_ours(spec)
    result["peak_rss"] = _peak_rss_mib()
    measurement.report(result)


def measure(spec, timeout):
    """Runs one (implementation, length) in a fresh process; its figures, or {"error": ...}."""
    env = measurement.child_env(spec["threads"], KERAS_BACKEND="tensorflow",
                            **(measurement.PASSIVE_WAIT if spec["impl"] == "torch" else {}))
    result = measurement.measure_in_child(measurement.child_command(__file__, spec), env, timeout)
    if "error" in result:
        return result
    tokens = spec["segments"] * spec["segment_length"]
    result.update(seconds=min(result["passes"]), tokens=tokens, segments=spec["segments"])
    result.update(tokens_per_s=tokens / result["seconds"], segment_s=result["seconds"] / spec["segments"],
                  run_rss=result["peak_rss"] - result["import_rss"])
    return result


def best_of(first, second):
    """PyTorch runs twice: the faster pass counts, and the larger of the two memory peaks."""
    if "error" in first:
        return second
    if "error" in second:
        return first
    best = dict(first if first["seconds"] <= second["seconds"] else second)
    for key in ("peak_rss", "run_rss"):
        best[key] = max(first[key], second[key])
    best["runs"] = 2
    return best


def linearity(results, impl):
    """Between the shortest and longest length of `impl`: (time ratio / length ratio, memory growth MiB)."""
    rows = sorted((r for r in results if r["impl"] == impl and "error" not in r), key=lambda r: r["tokens"])
    if len(rows) < 2:
        return None
    short, long = rows[0], rows[-1]
    return dict(short=short["tokens"], long=long["tokens"],
                time_per_length=(long["seconds"] / short["seconds"]) / (long["tokens"] / short["tokens"]),
                memory_growth=long["run_rss"] - short["run_rss"])


def run_benchmark(args, emit=print):
    """Measures every (length, implementation); returns the list of result dicts (one per row)."""
    size = "tiny" if args.quick else "base"
    common = dict(size=size, threads=args.threads, repeats=args.repeats,
                  segment_length=args.segment_length, memory_length=args.memory_length)
    results = []
    ours = [impl for impl in args.impls if impl != "torch"]
    # PyTorch before and after ours, so a change of load during the run does not favour either side.
    order = (["torch"] if "torch" in args.impls else []) + ours + (
        ["torch"] if "torch" in args.impls and ours else [])
    for tokens in args.lengths:
        spec = dict(common, segments=tokens // args.segment_length)
        rows = {}
        for impl in order:
            r = measure(dict(spec, impl=impl if impl == "torch" else "ours", xla=impl == "ours_xla"),
                        args.timeout)
            rows[impl] = best_of(rows[impl], r) if impl in rows else r
        for impl in args.impls:
            results.append(dict(rows[impl], impl=impl, tokens=tokens, segments=spec["segments"]))
        emit_length(results[-len(args.impls):], emit)
    return results


def _row(r):
    label = LABELS[r["impl"]] + (" (best of 2)" if r.get("runs") == 2 else "")
    if "error" in r:
        return f"| {r['tokens']} | {r['segments']} | {label} | failed: {r['error']} |"
    return (f"| {r['tokens']} | {r['segments']} | {label} | {r['tokens_per_s']:.0f} | {r['segment_s']:.3f} "
            f"| {r['seconds']:.2f} | {r['first_s']:.2f} | {r['peak_rss']:.0f} | {r['run_rss']:.0f} |")


def emit_length(rows, emit):
    for r in rows:
        emit(_row(r))
    by_impl = {r["impl"]: r for r in rows if "error" not in r}
    peer = by_impl.get("torch")
    for impl in ("ours", "ours_xla"):
        if peer and impl in by_impl:
            mine = by_impl[impl]
            emit(f"| | | ratio {LABELS[impl]} / PyTorch | {mine['tokens_per_s'] / peer['tokens_per_s']:.2f}x "
                 f"| | | | {mine['peak_rss'] / peer['peak_rss']:.2f}x "
                 f"| {mine['run_rss'] / peer['run_rss']:.2f}x |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=None,
                        help="document lengths in tokens, multiples of the segment length "
                             "(default 512 2048 8192; --quick: 512 2048)")
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per process after the warm-up")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads, both sides")
    parser.add_argument("--impls", nargs="+", default=None, choices=IMPLEMENTATIONS,
                        help="default: all three; --quick: torch ours")
    parser.add_argument("--segment-length", type=int, default=SEGMENT_LENGTH)
    parser.add_argument("--memory-length", type=int, default=MEMORY_LENGTH)
    parser.add_argument("--quick", action="store_true",
                        help="tiny model (2 x 64), and by default two lengths and no XLA: a smoke run")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    parser.add_argument("--output", default=None, help="also write the printed report to this file")
    parser.add_argument("--json", default=None, help="also write every row's figures to this file")
    args = results_table.parse_arguments(parser, argv, child)
    if args is None:  # a measurement's own process
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.lengths is None:
        args.lengths = [512, 2048] if args.quick else [512, 2048, 8192]
    if args.impls is None:
        args.impls = ["torch", "ours"] if args.quick else list(IMPLEMENTATIONS)
    odd = [n for n in args.lengths if n < args.segment_length or n % args.segment_length]
    if odd:
        parser.error(f"--lengths {odd}: each length must be a positive multiple of the segment length "
                     f"{args.segment_length}")

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    size = SIZES["tiny" if args.quick else "base"]
    emit(f"Long documents, {'TINY (--quick)' if args.quick else 'XLNet-Base'} "
         f"({size['num_layers']} x {size['hidden_dim']}, {size['num_heads']} heads, inner "
         f"{size['intermediate_dim']}, vocab {size['vocabulary_size']}, random weights), batch 1, "
         f"float32, segment {args.segment_length}, memory_length {args.memory_length}, reuse_length 0 "
         f"(whole segment), {args.threads} threads, fastest of {args.repeats} timed pass(es) per process, "
         f"one process per row, load average {os.getloadavg()[0]:.1f} at start")
    emit()
    emit("| tokens | segments | implementation | tokens/s | s/segment | pass s | warm-up s "
         "| peak RSS MiB | model+run MiB |")
    emit("|---|---|---|---|---|---|---|---|---|")
    legend = ("(pass s: the fastest timed document; warm-up s: the first call, on 2 segments, XLA on the "
              "whole document with its compilation; model+run: peak RSS minus the peak after the imports)")
    started = time.perf_counter()
    results = run_benchmark(args, emit)
    emit(legend)
    emit()
    emit("Linearity, shortest -> longest length: time ratio / length ratio (1.00 = linear), "
         "model+run memory growth (0 = flat)")
    emit()
    emit("| implementation | lengths | time / length ratio | memory growth MiB |")
    emit("|---|---|---|---|")
    for impl in args.impls:
        figures = linearity(results, impl)
        if figures:
            emit(f"| {LABELS[impl]} | {figures['short']} -> {figures['long']} | "
                 f"{figures['time_per_length']:.2f} | {figures['memory_growth']:+.0f} |")
    versions = sorted({r["version"] for r in results if "version" in r})
    emit()
    emit(f"{'; '.join(versions)}; load average {os.getloadavg()[0]:.1f} at end; "
         f"{(time.perf_counter() - started) / 60:.1f} min in all")
    if args.output:
        sys.path.insert(0, measurement.REPO)
        from xlnet_tf.storage.atomic_files import write_text

        # The file's title names the run's date and command, as RESULTS.md rows built from it do.
        command = " ".join(["python", "benchmarks/long_document_benchmark.py", *(argv or sys.argv[1:])])
        title = f"# {time.strftime('%Y-%m-%d')}: {command}"
        write_text(args.output, title + "\n" + "\n".join(lines) + "\n")
    if args.json:
        sys.path.insert(0, measurement.REPO)
        from xlnet_tf.storage.atomic_files import write_json

        write_json(args.json, {"rows": results,
                               "linearity": {impl: linearity(results, impl) for impl in args.impls}})
    return 0


def result_rows(section):
    """RESULTS.md rows: ours / Hugging Face tokens/s per document length (the table's `ratio` rows)."""
    if "implementation" not in section.header or "tokens/s" not in section.header:
        return []
    if "TINY" in section.context:
        return []  # --quick: a smoke run, not a result
    rows, tokens = [], ""
    for cells in section.rows:
        tokens = cells["tokens"] or tokens  # a ratio row leaves the length to the rows above it
        if not cells["implementation"].startswith("ratio "):
            continue
        name = cells["implementation"][len("ratio "):]
        rows.append(results_table.Row(
            f"long documents, XLNet-Base, {tokens} tokens in segments of 512 with memory: {name} tokens/s",
            "Hugging Face PyTorch", results_table.number(cells["tokens/s"]), "speed"))
    return rows


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
