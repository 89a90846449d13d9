"""Exact generation's arithmetic against this machine's matrix-product peak: what a speed ratio can reach.

`exact` generation recomputes the whole sequence at every step, on both sides
(`XLNetCausalLM(mode="exact")` and Hugging Face's `generate(use_mems=False)`):
in "bi" attention every token sees the new one, so every hidden state of every
layer changes when a token is appended. The tokens/s of either side are then
bounded by the floating-point work a call needs over the rate the machine
multiplies matrices at. This script

- counts the multiply-adds of one `generate` call (XLNet-Base, prompt 128,
  32 new tokens, as `generation_benchmark.py` runs it) three ways: ours (the
  static `max_length` columns at every step), Hugging Face's (columns growing
  by one a step, the placeholder included, positions projected every step),
  and the least any exact implementation needs (below);
- measures TensorFlow's matrix-product rate on this machine at the step's
  feed-forward shape (`[batch * 160, 768] x [768, 3072]`, the largest product
  of the step), float32 and bfloat16, the best of a few timed stretches;
- reads the newest `exact` rows of `generation_benchmark_results.txt` and
  prints what each side reached in GFLOP/s, and what `--target` times Hugging
  Face's tokens/s would need as a share of the peak (the higher of the
  product's rate and what ours reached over a whole call).

The least arithmetic counts only what a new token changes: layer 0's keys,
queries and values of earlier tokens come from their embeddings and are kept,
and its attention is updated for the new key column and the new query row
only (an online softmax); the last layer's content stream is not needed past
its keys and values (only the query stream predicts); the query stream runs
one column; positions are projected once per call. It is a lower bound: a
ratio that needs more than the peak at this bound needs it at any exact
implementation's arithmetic.

Example:
    python benchmarks/generation_arithmetic.py
    python benchmarks/generation_arithmetic.py --target 3 --seconds 4
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generation_benchmark  # noqa: E402
import results_table  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generation_benchmark_results.txt")


def layer_flops(columns, keys, position_keys, base=generation_benchmark.BASE):
    """One full layer (content stream): `columns` queries over `keys` keys and `position_keys` distances."""
    d, inner = base["hidden_dim"], base["num_heads"] * base["head_dim"]
    projections = 4 * 2 * d * inner * columns  # q, k, v, o
    attention = 2 * 2 * inner * keys * columns  # content scores, weighted values
    attention += 2 * inner * position_keys * columns  # position scores (before the relative shift)
    feed_forward = 2 * 2 * d * base["intermediate_dim"] * columns
    return projections + attention + feed_forward


def query_stream_flops(keys, position_keys, base=generation_benchmark.BASE):
    """One layer of the query stream at the one predicted position."""
    return layer_flops(1, keys, position_keys, base)


def head_flops(base=generation_benchmark.BASE):
    return 2 * base["hidden_dim"] * base["vocabulary_size"]


def position_flops(positions, base=generation_benchmark.BASE):
    """One layer's projection of `positions` relative positions."""
    return 2 * base["hidden_dim"] * base["num_heads"] * base["head_dim"] * positions


def call_flops(kind, batch, prompt=generation_benchmark.PROMPT, new=generation_benchmark.NEW_TOKENS,
               base=generation_benchmark.BASE):
    """Floating-point operations of one exact `generate` call: `kind` is "ours", "hugging_face" or "least"."""
    layers, d, inner = base["num_layers"], base["hidden_dim"], base["num_heads"] * base["head_dim"]
    max_length = prompt + new
    # Ours projects the positions once per call for the whole batch; Hugging Face per step and per row.
    shared = layers * position_flops(2 * max_length, base) if kind in ("ours", "least") else 0
    per_row = prompt * 3 * 2 * d * inner if kind == "least" else 0  # layer 0's q, k, v of the prompt, kept
    for step in range(new):
        known = prompt + step  # tokens before the predicted position
        if kind in ("ours", "hugging_face"):
            # Ours: static shapes, the whole window every step; Hugging Face's: the placeholder's column too.
            columns = max_length if kind == "ours" else known + 1
            per_row += layers * (layer_flops(columns, columns, 2 * columns, base)
                                 + query_stream_flops(columns, 2 * columns, base))
            if kind == "hugging_face":
                per_row += layers * position_flops(2 * columns, base)
        else:
            # Layer 0: the new token's q, k, v; its query row and key column of the attention; o and the
            # feed-forward of every column (their attention outputs changed).
            layer0 = 3 * 2 * d * inner + 2 * 3 * 2 * inner * known
            layer0 += known * (2 * d * inner + 2 * 2 * d * base["intermediate_dim"])
            middle = (layers - 2) * layer_flops(known, known, known, base)
            last = known * 2 * 2 * d * inner  # the last layer's keys and values only
            per_row += layer0 + middle + last + layers * query_stream_flops(known, known, base)
        per_row += head_flops(base)
    return batch * per_row + shared


def matmul_rate(dtype, rows, seconds):
    """Best GFLOP/s of TensorFlow's `[rows, 768] x [768, 3072]` product over a few timed stretches."""
    import tensorflow as tf

    d, inner = generation_benchmark.BASE["hidden_dim"], generation_benchmark.BASE["intermediate_dim"]
    a = tf.cast(tf.random.normal([rows, d]), dtype)
    b = tf.cast(tf.random.normal([d, inner]), dtype)
    product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b)[:1, :1], tf.float32)))
    product(a, b).numpy()
    best = 0.0
    for _ in range(3):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            product(a, b).numpy()
            count += 1
        best = max(best, 2 * rows * d * inner * count / (time.perf_counter() - start) / 1e9)
    return best


def recorded_exact_rows(path=RESULTS):
    """The newest recorded `exact` row per (batch, dtype): ours and Hugging Face's tokens/s."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = {}
    for section in results_table.sections(text):
        if "mode (HF)" not in section.header:
            continue
        for cells in section.rows:
            if not cells["mode (HF)"].startswith("exact") or not results_table.is_number(cells["ours tokens/s"]):
                continue
            key = (int(cells["batch"]), cells["dtype"].split()[0])
            found.setdefault(key, (results_table.number(cells["ours tokens/s"]),
                                   results_table.number(cells["HF tokens/s"]), section.date))
    if not found:
        raise SystemExit(f"{path}: no exact rows recorded; run generation_benchmark.py --mode exact first")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=3.0, help="the ratio to Hugging Face's tokens/s to test")
    parser.add_argument("--seconds", type=float, default=6.0, help="time spent measuring each peak")
    parser.add_argument("--results", default=RESULTS, help="the generation benchmark's results file to read")
    args = parser.parse_args(argv)
    rows = recorded_exact_rows(args.results)
    new = generation_benchmark.NEW_TOKENS
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, 1-minute load "
          f"{os.getloadavg()[0]:.2f}; XLNet-Base, prompt {generation_benchmark.PROMPT}, {new} new tokens, exact")
    print("| batch | dtype | GFLOP per call: ours / HF / least | ours GFLOP/s | HF GFLOP/s | TF matmul GFLOP/s "
          f"| {args.target:g}x HF's tokens/s | needs GFLOP/s at the least | / peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    peaks = {}
    for (batch, dtype), (ours_rate, hf_rate, date) in sorted(rows.items()):
        rows_ = batch * (generation_benchmark.PROMPT + new)
        peaks.setdefault((dtype, rows_), matmul_rate(dtype, rows_, args.seconds))
        peak = peaks[(dtype, rows_)]
        ours, hf, least = (call_flops(k, batch) / 1e9 for k in ("ours", "hugging_face", "least"))
        calls_per_second = (ours_rate / (batch * new), hf_rate / (batch * new))
        wanted = args.target * hf_rate
        needs = least * wanted / (batch * new)
        reached = ours * calls_per_second[0]
        peak = max(peak, reached)  # a whole step can beat one product's timing: the higher is the peak
        hf_dtype = generation_benchmark.hugging_face_dtype(dtype)
        print(f"| {batch} | {dtype} (HF {hf_dtype}; recorded {date}) | {ours:.0f} / {hf:.0f} / {least:.0f} "
              f"| {reached:.0f} | {hf * calls_per_second[1]:.0f} | {peaks[(dtype, rows_)]:.0f} "
              f"| {wanted:.2f} | {needs:.0f} | {needs / peak:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
