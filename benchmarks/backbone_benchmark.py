"""XLNet-Base on CPU: our Keras model next to Hugging Face's PyTorch XLNet, in the same run.

Two measurements per sequence length, each in a fresh subprocess (so the peak
RSS, `ru_maxrss`, belongs to that measurement alone and neither framework is
imported into the other's process):
  - infer: content stream only, `XLNetBackbone` vs `XLNetModel` (eval, no grad);
  - train: a two-stream forward + backward step of the LM (`XLNetPretrainer` vs
    `XLNetLMHeadModel`, dropout on): random factorization order (`perm_mask`),
    `target_mapping` with 85 predictions per 512 tokens (scaled with the length),
    cross-entropy on the predictions, gradients of every weight materialised.
    No optimizer update in either.
Our model runs inside `tf.function`, with and without `jit_compile=True` (XLA);
the float32 ratio uses the faster of the two. bfloat16 rows: inference with the
`"bfloat16"` policy (bfloat16 variables, what `export_task_model(dtype="bfloat16")`
serves), the train step with `"mixed_bfloat16"` (float32 variables); their ratio
is to PyTorch in float32. PyTorch runs first and again last; its faster run
counts, and each row's time is its fastest timed step (load only slows a step
down), so a change of load during the run does not favour either side. Both frameworks get the same thread
counts (intra-op = --threads, inter-op = 1). PyTorch runs with
OMP_WAIT_POLICY=PASSIVE by default (--torch-omp-wait-policy): on a shared, busy
machine OpenMP's spinning barriers made PyTorch 2x slower, which would flatter
our ratios. Weights are random; both models have the same shapes (12 layers,
hidden 768, 12 heads, inner 3072, vocab 32000).

With --paired, the table is replaced by ratios from interleaved steps: each
pair of `PAIRED_RATIOS` is two long-lived workers taking turns, one step at a
time, run in both start orders (`interleaved_steps.py`); the figure is the
geometric mean over the two orders of the median same-round ratio. Sequential
subprocesses, as in the table, carry the VM's drift of 10-45% over an hour.

Usage:
    python benchmarks/backbone_benchmark.py [--seqs 128 512] [--batch 2] [--steps 3]
        [--paired [--paired-ratios torch bf16-torch bf16 xla] [--rounds 7]]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import measurement, results_table  # noqa: E402
from benchmarks.interleaved_steps import pair_summary, run_in_both_orders, serve, spawn  # noqa: E402
from benchmarks.two_stream_batch import two_stream_batch  # noqa: E402

BASE = measurement.XLNET_BASE
IMPLEMENTATIONS = ("torch", "keras", "keras_xla", "keras_bf16", "keras_bf16_xla")
DEFAULT_IMPLEMENTATIONS = ("torch", "keras", "keras_xla", "keras_bf16")
LABELS = {"torch": "HF PyTorch (eager)", "keras": "ours tf.function", "keras_xla": "ours tf.function+XLA",
          "keras_bf16": "ours bfloat16", "keras_bf16_xla": "ours bfloat16+XLA"}
# --paired: {key: (label, numerator worker, denominator worker)}, a ratio of step times (a
# speed ratio puts the other side on top); each pair is timed on its own, in both start orders.
PAIRED_RATIOS = {
    "torch": ("ours / PyTorch, float32 (speed)", "torch", "keras"),
    "bf16-torch": ("ours bfloat16 / PyTorch float32 (speed)", "torch", "keras_bf16"),
    "bf16": ("ours bfloat16 / ours float32 (speed)", "keras", "keras_bf16"),
    "xla": ("XLA / no XLA, float32 (step time)", "keras_xla", "keras"),
}


def make_inputs(batch, length, seed=0):
    """Identical numpy inputs for both frameworks: a two-stream pretraining-style batch."""
    return two_stream_batch(batch, length, BASE["vocabulary_size"], seed)


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mib():
    return measurement.peak_rss_bytes() / 2**20


def _time(step, steps):
    step()  # Warm-up: graph tracing / XLA compilation / allocator growth.
    return min(measurement.time_calls(step, steps))


def worker_torch(mode, batch, length, threads):
    import transformers

    torch = measurement.limit_torch_threads(threads)
    data = make_inputs(batch, length)
    config = measurement.hugging_face_config(BASE, mem_len=None, dropout=0.1)
    ids = torch.tensor(data["token_ids"], dtype=torch.long)
    segments = torch.tensor(data["segment_ids"], dtype=torch.long)
    mask = torch.tensor(data["padding_mask"], dtype=torch.float32)
    if mode == "infer":
        model = transformers.XLNetModel(config).eval()

        def step():
            with torch.no_grad():
                model(input_ids=ids, token_type_ids=segments, attention_mask=mask, use_mems=False)
    else:
        model = transformers.XLNetLMHeadModel(config).train()
        perm_mask = torch.tensor(data["perm_mask"])
        target_mapping = torch.tensor(data["target_mapping"])
        labels = torch.tensor(data["targets"], dtype=torch.long)

        def step():
            model.zero_grad(set_to_none=True)
            out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask, perm_mask=perm_mask,
                        target_mapping=target_mapping, labels=labels, use_mems=False)
            out.loss.backward()
    return step, f"torch {torch.__version__}"


def worker_keras(mode, batch, length, threads, jit_compile, bfloat16=False):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    tf = measurement.limit_tensorflow_threads(threads)
    import keras

    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    keras.utils.set_random_seed(0)
    data = make_inputs(batch, length)
    config = XLNetConfig(**BASE, activation="gelu", dropout=0.1, attention_dropout=0.1)
    dtype = None
    if bfloat16:
        dtype = "bfloat16" if mode == "infer" else "mixed_bfloat16"
    backbone = XLNetBackbone(config, dtype=dtype)
    base_keys = ("token_ids", "segment_ids", "padding_mask")
    if mode == "infer":
        inputs = {k: tf.constant(data[k]) for k in base_keys}

        @tf.function(jit_compile=jit_compile)
        def forward(x):
            return backbone(x, training=False)["sequence_output"]

        def step():
            forward(inputs).numpy()
    else:
        pretrainer = XLNetPretrainer(backbone)
        inputs = {k: tf.constant(data[k]) for k in base_keys + ("perm_mask", "target_mapping")}
        targets = tf.constant(data["targets"])
        variables = pretrainer.trainable_variables

        @tf.function(jit_compile=jit_compile)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = pretrainer(x, training=True)["logits"]
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            return loss, tape.gradient(loss, variables)

        def step():
            loss, _ = train_step(inputs, targets)
            loss.numpy()
    return step, f"tensorflow {tf.__version__}"


def run_worker(args):
    impl, mode, length = args.worker
    length = int(length)
    if impl == "torch":
        step, version = worker_torch(mode, args.batch, length, args.threads)
    else:
        step, version = worker_keras(mode, args.batch, length, args.threads,
                                     jit_compile=impl.endswith("_xla"), bfloat16="bf16" in impl)
    if args.serve:
        step()  # Warm-up: graph tracing / XLA compilation / allocator growth.
        serve(step)
        return
    rss_built = _rss_mib()
    seconds = _time(step, args.steps)
    measurement.report(dict(seconds=seconds, rss_built=rss_built, version=version, peak_rss=_peak_rss_mib(),
                            tokens_per_s=args.batch * length / seconds))


def _command_and_env(impl, mode, length, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", impl, mode, str(length),
               "--batch", str(args.batch), "--steps", str(args.steps), "--threads", str(args.threads)]
    wait_policy = args.torch_omp_wait_policy if impl == "torch" else ""
    return command, measurement.child_env(**({"OMP_WAIT_POLICY": wait_policy} if wait_policy else {}))


def measure(impl, mode, length, args):
    return measurement.measure_in_child(*_command_and_env(impl, mode, length, args), args.timeout)


def paired_table(args):
    """Each ratio of `PAIRED_RATIOS` from two long-lived workers taking turns, in both start orders.

    Both workers build their model and warm up, then take turns, one step at a
    time, for --rounds rounds; then the pair runs again with the other worker
    started first. The figure is `balanced_ratio`: the geometric mean over the
    two orders of the median same-round ratio, which neither the machine's drift
    nor the start order moves (`interleaved_steps`).
    """
    print(f"XLNet-Base, batch {args.batch}, {args.threads} threads, interleaved steps, {args.rounds} rounds per "
          f"start order; ratio: geometric mean over the two orders of the median per-round ratio\n")
    print(f"| mode | seq | {measurement.PAIR_COLUMNS} |")
    print("|---|---|---|---|---|---|")
    for mode in args.modes:
        for length in args.seqs:
            for key in args.paired_ratios:
                label, top, bottom = PAIRED_RATIOS[key]

                def start(impl, mode=mode, length=length):
                    command, env = _command_and_env(impl, mode, length, args)
                    return spawn(command + ["--serve"], env=env)

                passes, failed = run_in_both_orders(start, (top, bottom), args.rounds, rewarm=1)
                row = pair_summary(passes, top, bottom)
                if row is None:
                    errors = "; ".join(f"{LABELS[i]}: {r.get('error', '')[-200:]}" for i, r in failed.items())
                    print(f"| {mode} | {length} | {label} | failed: {errors or 'a worker died'} | | |", flush=True)
                    continue
                print(f"| {mode} | {length} | {label} | {measurement.pair_cells(row, digits=3)} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--modes", nargs="+", default=["infer", "train"], choices=["infer", "train"])
    parser.add_argument("--impls", nargs="+", default=list(DEFAULT_IMPLEMENTATIONS), choices=IMPLEMENTATIONS)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    parser.add_argument("--torch-omp-wait-policy", default="PASSIVE",
                        help="OMP_WAIT_POLICY for the PyTorch subprocess ('' leaves it unset)")
    parser.add_argument("--json", default=None, help="also write all results to this file")
    parser.add_argument("--paired", action="store_true",
                        help="instead of the table: interleaved pairs in both start orders (the steadiest ratios)")
    parser.add_argument("--paired-ratios", nargs="+", default=list(PAIRED_RATIOS), choices=list(PAIRED_RATIOS),
                        help="--paired's ratios: ours/PyTorch, bf16/PyTorch f32, bf16/our f32, XLA/no XLA")
    parser.add_argument("--rounds", type=int, default=7, help="--paired's rounds per start order")
    parser.add_argument("--worker", nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    results_table.add_arguments(parser)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.paired:
        paired_table(args)
        return

    print(f"XLNet-Base (12 x 768, 12 heads, inner 3072, vocab 32000), batch {args.batch}, "
          f"{args.threads} threads, {args.steps} timed steps after 1 warm-up, one subprocess per row, "
          f"load average {os.getloadavg()[0]:.1f} at start; fastest timed step per row")
    header = (f"{'mode':<6}{'seq':>5}  {'implementation':<22}{'tokens/s':>10}{'step s':>9}"
              f"{'peak RSS MiB':>14}{'RSS after build':>17}")
    print(header)
    print("-" * len(header))
    results = []
    for mode in args.modes:
        for length in args.seqs:
            rows = {}
            order = list(args.impls) + (["torch"] if "torch" in args.impls else [])
            for position, impl in enumerate(order):
                r = measure(impl, mode, length, args)
                if impl in rows and "error" not in rows[impl] and (
                        "error" in r or r["tokens_per_s"] < rows[impl]["tokens_per_s"]):
                    r = rows[impl]  # PyTorch's second run: the faster one counts
                rows[impl] = r
                results.append(dict(r, impl=impl, mode=mode, seq=length, batch=args.batch))
                label = LABELS[impl] + (" (best of 2)" if position == len(order) - 1 and impl == "torch"
                                        and len(order) > 1 else "")
                if "error" in r:
                    print(f"{mode:<6}{length:>5}  {label:<22}  failed: {r['error']}")
                    continue
                print(f"{mode:<6}{length:>5}  {label:<22}{r['tokens_per_s']:>10.1f}{r['seconds']:>9.3f}"
                      f"{r['peak_rss']:>14.0f}{r['rss_built']:>17.0f}", flush=True)
            ours = [rows[i] for i in ("keras", "keras_xla") if i in rows and "error" not in rows[i]]
            if ours and "torch" in rows and "error" not in rows["torch"]:
                best = max(ours, key=lambda r: r["tokens_per_s"])
                which = "XLA" if best is rows.get("keras_xla") else "no XLA"
                torch_row = rows["torch"]
                print(f"{'':<11}ratio ours/PyTorch ({which}): speed "
                      f"{best['tokens_per_s'] / torch_row['tokens_per_s']:.2f}x, peak memory "
                      f"{best['peak_rss'] / torch_row['peak_rss']:.2f}x", flush=True)
                for impl in ("keras_bf16", "keras_bf16_xla"):
                    if impl in rows and "error" not in rows[impl]:
                        print(f"{'':<11}ratio {LABELS[impl]}/PyTorch float32: speed "
                              f"{rows[impl]['tokens_per_s'] / torch_row['tokens_per_s']:.2f}x; "
                              f"over our float32: {rows[impl]['tokens_per_s'] / best['tokens_per_s']:.2f}x",
                              flush=True)
            if all(i in rows and "error" not in rows[i] for i in ("keras", "keras_xla")):
                print(f"{'':<11}XLA / no XLA: speed "
                      f"{rows['keras_xla']['tokens_per_s'] / rows['keras']['tokens_per_s']:.2f}x", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def result_rows(section):
    """RESULTS.md rows: the `--paired` ratios (XLNet-Base, batch 2)."""
    if "mode" not in section.header:
        return []
    return results_table.paired_rows(section, lambda r: f"backbone {r['mode']}, XLNet-Base, seq {r['seq']}, batch 2")


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
