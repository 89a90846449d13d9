"""Pretraining step throughput and memory: our `fit` step next to Hugging Face's PyTorch XLNet.

Each measurement runs in a fresh subprocess, so its peak RSS (`ru_maxrss`) is its
own. A measurement is one full training step at XLNet-Base size (12 layers,
hidden 768, 12 heads, inner 3072, vocab 32000) with the pretraining objective:
two-stream attention, a random factorization order, 85 predictions per 512
tokens, recurrence memory (reuse L/2, memory 3L/4, fed back every step),
dropout on, cross-entropy, backward, AdamW update. Ours is `XLNetPretrainer.fit`
(the train step of `xlnet-tf pretrain`); the peer is `XLNetLMHeadModel` with
`torch.optim.AdamW`, its `mems` fed back the same way. bfloat16 means Keras'
`mixed_bfloat16` policy and `torch.autocast("cpu", torch.bfloat16)`. Both use
the same intra-op thread count (inter-op 1). Tokens/s = batch x seq / the fastest
timed step (the first step, with tracing, is excluded), because on a shared machine
load only ever slows a step down; PyTorch runs before and after ours and its fastest
step of both runs counts, so both sides get the same chance at a quiet moment.

Memory: "peak" is the process's peak RSS; "step" is that peak minus the peak right
after the framework's imports, i.e. what the model, optimizer state and training
step add (TensorFlow's runtime alone is about 220 MB larger than PyTorch's with
transformers, which decides the peak ratio at short sequences).

Tables:
  1. tokens/s, peak and step memory, ours (tf.function, and XLA as
     configs/pretrain/base.yaml sets) vs PyTorch, seq 128 and 512 in float32,
     bfloat16 at seq 128 (and at 512 with --bf16-512);
  1b. (--batch-table) ours bfloat16 / ours float32 at batch 8 (seq 128) and 4 and 8 (seq 512);
  1c. (--paired) the same ratios (ours / PyTorch, XLA / no XLA, bfloat16 / float32) from
      pairs of long-lived workers taking interleaved steps (`interleaved_steps.py`), each
      pair run in both start orders: the geometric mean of the two orders' median
      per-round ratios, which neither the VM's drift nor the start order moves;
  2. 1 -> 2 replicas (MirroredStrategy over 2 virtual CPU devices, same global batch);
  3. largest per-replica batch at seq 512 for Base and Large, without and with
     `rematerialize`: step memory measured at batch 1 and 2 on CPU, a line fitted
     through them, solved for 16/32/80 GB. The runtime's own RSS is left out, as it
     does not live in accelerator memory; this is an estimate, not a device
     measurement (device kernels' workspaces and allocator rounding come on top).

Usage:
    python benchmarks/pretraining_benchmark.py [--steps 2] [--threads 2] [--quick] [--bf16-512] [--step-only]
        [--batch-table] [--skip-step-table] [--paired [--rounds 7] [--paired-seqs 128 512]
        [--paired-ratios torch xla bf16 bf16-xla]]

Table 1 also gives, from the same run, XLA / no XLA for each row and, for bfloat16
rows, ours bfloat16 / ours float32 at the same length; the load average is printed.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import measurement, results_table  # noqa: E402
from benchmarks.interleaved_steps import (StepServer, pair_summary, run_in_both_orders,  # noqa: E402
                                          serve, spawn)
from benchmarks.two_stream_batch import two_stream_batch  # noqa: E402

VOCAB = measurement.XLNET_BASE["vocabulary_size"]
SIZES = {
    "base": measurement.XLNET_BASE,
    "large": dict(vocabulary_size=VOCAB, num_layers=24, num_heads=16, head_dim=64, hidden_dim=1024,
                  intermediate_dim=4096),
}


def make_batch(batch, length, seed=0):
    """`two_stream_batch` in the reader's keys: `target_ids` and an all-ones `target_mask`."""
    import numpy as np

    data = two_stream_batch(batch, length, VOCAB, seed)
    data["target_ids"] = data.pop("targets")
    data["target_mask"] = np.ones(data["target_ids"].shape, np.float32)
    return data


def _peak_rss_gb():
    return measurement.peak_rss_bytes() / 1e9


def run_keras(spec):
    """Timed `fit` steps; returns (step seconds, peak RSS GB right after the imports)."""
    if spec["replicas"] > 1:
        import tensorflow as tf

        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration() for _ in range(spec["replicas"])])
    import keras

    tf = measurement.limit_tensorflow_threads(spec["threads"])
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
    from xlnet_tf.optimizers import build_optimizer

    import_rss_gb = _peak_rss_gb()
    length, batch = spec["seq"], spec["batch"]
    config = XLNetConfig(**SIZES[spec["size"]], memory_length=3 * length // 4, reuse_length=length // 2)
    if spec["replicas"] > 1:
        strategy = tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices("CPU")])
    else:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    dtype = "mixed_bfloat16" if spec["dtype"] == "bfloat16" else None
    with strategy.scope():
        model = XLNetPretrainer(XLNetBackbone(config, dtype=dtype,
                                              rematerialize=spec.get("remat", False)))
        model.compile(optimizer=build_optimizer(model, learning_rate=1e-4, warmup_steps=1,
                                                 train_steps=1000),
                      jit_compile=spec["xla"])
        model.enable_recurrence_memory(batch // spec["replicas"])
    data = make_batch(batch, length)
    dataset = tf.data.Dataset.from_tensors(data).repeat()
    if spec.get("serve"):
        # One `fit` that runs a step each time the driver asks (table 1c): the step
        # timed is exactly the one `fit` runs, callbacks and all.
        server, started = StepServer(), []

        def on_batch_end(batch, logs):
            if started:
                server.report(time.perf_counter() - started.pop())
            else:
                server.ready()  # after the first step: tracing and compilation
            if server.next_step():
                started.append(time.perf_counter())
            else:
                model.stop_training = True

        model.fit(dataset, steps_per_epoch=10**9, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=on_batch_end)])
        return [], import_rss_gb
    stamps = []
    timer = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: stamps.append(time.perf_counter()))
    total = spec["steps"] + 1
    model.fit(dataset, steps_per_epoch=total, epochs=1, verbose=0, callbacks=[timer])
    steps = [b - a for a, b in zip(stamps[:-1], stamps[1:])]
    return steps, import_rss_gb


def run_torch(spec):
    """Timed training steps; returns (step seconds, peak RSS GB right after the imports)."""
    from transformers import XLNetLMHeadModel

    import_rss_gb = _peak_rss_gb()
    torch = measurement.limit_torch_threads(spec["threads"])
    length, batch = spec["seq"], spec["batch"]
    config = measurement.hugging_face_config(SIZES[spec["size"]], mem_len=3 * length // 4, reuse_len=length // 2,
                                         attn_type="bi", dropout=0.1, use_mems_train=True)
    model = XLNetLMHeadModel(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    data = {k: torch.from_numpy(v) for k, v in make_batch(batch, length).items()}
    mems = None

    def step():
        nonlocal mems
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec["dtype"] == "bfloat16"):
            out = model(input_ids=data["token_ids"].long(), token_type_ids=data["segment_ids"].long(),
                        attention_mask=data["padding_mask"].float(), perm_mask=data["perm_mask"],
                        target_mapping=data["target_mapping"], mems=mems, use_mems=True)
            logits = out.logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                     data["target_ids"].long().reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mems = [m.detach() for m in out.mems]

    step()  # warm-up, as on our side
    if spec.get("serve"):
        serve(step)
        return [], import_rss_gb
    return measurement.time_calls(step, spec["steps"]), import_rss_gb


def child(spec):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    steps, import_rss_gb = run_torch(spec) if spec["impl"] == "torch" else run_keras(spec)
    # The fastest timed step: load from other jobs only ever slows a step down.
    measurement.report({"step_s": min(steps) if steps else None, "steps": steps, "peak_rss_gb": _peak_rss_gb(),
                    "import_rss_gb": import_rss_gb})


def _child_env(spec):
    return measurement.child_env(spec["threads"], **measurement.PASSIVE_WAIT)


def measure(spec, timeout=1800):
    result = measurement.measure_in_child(measurement.child_command(__file__, spec), _child_env(spec), timeout)
    if "error" in result:
        return result
    if result["step_s"]:
        result["tokens_per_s"] = spec["batch"] * spec["seq"] / result["step_s"]
    if result.get("import_rss_gb"):
        # What the model and its training step add to the framework's own runtime.
        result["step_rss_gb"] = result["peak_rss_gb"] - result["import_rss_gb"]
    return result


def _best_of(first, second):
    """The faster run's speed and the larger of the two peaks (PyTorch runs twice)."""
    best = dict(first)
    if second.get("tokens_per_s", 0) > best.get("tokens_per_s", 0):
        best["tokens_per_s"] = second["tokens_per_s"]
    for key in ("peak_rss_gb", "step_rss_gb"):
        if second.get(key):
            best[key] = max(second[key], best.get(key) or 0)
    return best


def _fmt(result, key, pattern):
    return pattern.format(result[key]) if key in result and result[key] is not None else "-"


def _batch_table(common):
    """Table 1b: our bfloat16 step against our float32 step at per-device batches users train at.

    At batch 2 (seq 128) and 1 (seq 512) the optimizer update, whose cost does
    not depend on the batch or on the compute dtype, is a large part of the
    step; larger batches show what bfloat16 buys per example. Each dtype runs
    twice, alternating, and the faster run counts.
    """
    print("\n## 1b. bfloat16 / float32, ours, larger batches (no XLA)\n")
    print("| seq | batch | float32 tok/s | bfloat16 tok/s | bf16 / our f32 |")
    print("|---|---|---|---|---|")
    for seq, batch in ((128, 8), (512, 4), (512, 8)):
        speed = {}
        for dtype in ("float32", "bfloat16", "float32", "bfloat16"):
            result = measure(dict(common, impl="keras", seq=seq, batch=batch, dtype=dtype))
            speed[dtype] = max(speed.get(dtype, 0), result.get("tokens_per_s") or 0)
        ratio = speed["bfloat16"] / speed["float32"] if speed["float32"] and speed["bfloat16"] else None
        print(f"| {seq} | {batch} | {speed['float32']:.0f} | {speed['bfloat16']:.0f} | "
              f"{'-' if ratio is None else f'{ratio:.2f}x'} |", flush=True)


# Table 1c's pairs: (impl, dtype, xla) each. Two workers at a time: with all five of
# seq 128 alive (17 GB of RSS on the 24 GB VM), PyTorch's steps took 2.85 s against
# 2.16 s in a pair. Each pair runs in both start orders: the worker started first ran
# a few % slow (twin workers of the same step; see `interleaved_steps`).
_F32, _F32_XLA = ("keras", "float32", False), ("keras", "float32", True)
_BF16, _BF16_XLA = ("keras", "bfloat16", False), ("keras", "bfloat16", True)
_TORCH = ("torch", "float32", False)
PAIRED_GROUPS = tuple((seq, batch, pair) for seq, batch in ((128, 2), (512, 1))
                      for pair in ((_TORCH, _F32), (_F32, _F32_XLA), (_F32, _BF16), (_BF16, _BF16_XLA)))
# {key: (label, numerator worker, denominator worker)} over step times: a speed ratio
# puts the other side's time on top.
PAIRED_RATIOS = {
    "torch": ("ours / PyTorch, float32 (speed)", _TORCH, _F32),
    "xla": ("XLA / no XLA, float32 (step time)", _F32_XLA, _F32),
    "bf16": ("bfloat16 / our float32 (speed)", _F32, _BF16),
    "bf16-xla": ("XLA / no XLA, bfloat16 (step time)", _BF16_XLA, _BF16),
}


def _worker_name(member):
    impl, dtype, xla = member
    return ("PyTorch" if impl == "torch" else "ours") + f" {dtype}" + (" XLA" if xla else "")


def _paired_table(common, rounds, seqs=(128, 512), ratios=None):
    """Table 1c: the speed ratios with every worker's steps interleaved (`interleaved_steps`).

    Each worker builds its model and runs one warm-up step, then the two workers
    of a pair take turns, one at a time: an untimed step (a step right after
    sitting idle runs slower, see `run_rounds`), then the timed one. The pair
    runs twice, each worker started first once (`run_in_both_orders`). A ratio is
    the geometric mean over the two orders of the median same-round ratio, which
    neither the machine's drift over minutes nor the start order moves; each
    order's figure is printed beside it.
    """
    print(f"\n## 1c. Interleaved steps, {rounds} rounds per start order: balanced median of per-round ratios\n")
    print(f"| seq | batch | {measurement.PAIR_COLUMNS} |")
    print("|---|---|---|---|---|---|")
    for seq, batch, members in PAIRED_GROUPS:
        labels = [(label, top, bottom) for key, (label, top, bottom) in PAIRED_RATIOS.items()
                  if set((top, bottom)) == set(members) and (ratios is None or key in ratios)]
        if seq not in seqs or not labels:
            continue

        def start(member, seq=seq, batch=batch):
            impl, dtype, xla = member
            spec = dict(common, impl=impl, seq=seq, batch=batch, dtype=dtype, xla=xla, serve=True)
            return spawn(measurement.child_command(__file__, spec), env=_child_env(spec))

        passes, failed = run_in_both_orders(start, members, rounds, rewarm=1)
        for member, result in failed.items():
            print(f"<!-- {_worker_name(member)} seq {seq}: {result.get('error', '')[-200:]} -->")
        for label, top, bottom in labels:
            row = pair_summary(passes, top, bottom)
            if row is None:
                continue
            print(f"| {seq} | {batch} | {label} | {measurement.pair_cells(row)} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up step")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bf16-512", action="store_true", help="also bfloat16 at seq 512 (slow on CPU)")
    parser.add_argument("--quick", action="store_true", help="seq 128 only, no Large memory runs")
    parser.add_argument("--step-only", action="store_true", help="table 1 only")
    parser.add_argument("--batch-table", action="store_true",
                        help="also table 1b: bfloat16 / float32 of ours at batch 8 (seq 128) and 4 and 8 (seq 512)")
    parser.add_argument("--skip-step-table", action="store_true",
                        help="tables 2 and 3 only (replica scaling, largest batch)")
    parser.add_argument("--paired", action="store_true",
                        help="also table 1c: the speed ratios from interleaved steps")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of table 1c, per start order")
    parser.add_argument("--paired-seqs", type=int, nargs="+", default=[128, 512], choices=[128, 512],
                        help="sequence lengths of table 1c")
    parser.add_argument("--paired-ratios", nargs="+", default=list(PAIRED_RATIOS), choices=list(PAIRED_RATIOS),
                        help="ratios of table 1c: ours/PyTorch, XLA/no XLA (f32), bf16/f32, XLA/no XLA (bf16)")
    args = results_table.parse_arguments(parser, argv, child)
    if args is None:  # a measurement's own process
        return 0
    common = dict(steps=args.steps, threads=args.threads, xla=False, replicas=1, size="base")
    rows = [(128, 2, "float32"), (128, 2, "bfloat16")]
    if not args.quick:
        rows.append((512, 1, "float32"))
        if args.bf16_512:
            rows.append((512, 1, "bfloat16"))

    if args.skip_step_table:
        rows = []
    if rows:  # --skip-step-table prints no empty table 1
        print("## 1. Full training step, XLNet-Base, ours (fit) vs PyTorch (HF), "
              f"{args.threads} threads, load average {os.getloadavg()[0]:.1f} at start\n")
        print("| seq | batch | dtype | ours tok/s | ours XLA tok/s | PyTorch tok/s | speed ratio "
              "| speed ratio XLA | XLA / no XLA | bf16 / our f32 | ours peak GB | ours XLA peak GB "
              "| PyTorch peak GB | peak ratio | ours step GB | PyTorch step GB | step ratio |")
        print("|" + "---|" * 17)
    float32_speed = {}
    memory_points = {}
    for seq, batch, dtype in rows:
        spec = dict(common, seq=seq, batch=batch, dtype=dtype)
        peer_first = measure(dict(spec, impl="torch"))
        ours = measure(dict(spec, impl="keras"))
        ours_xla = measure(dict(spec, impl="keras", xla=True))
        peer_last = measure(dict(spec, impl="torch"))
        peer = _best_of(peer_first, peer_last)

        def ratio(mine, key, peer=peer):
            if mine.get(key) and peer.get(key):
                return f"{mine[key] / peer[key]:.2f}x"
            return "-"

        xla_ratio = bf16_ratio = "-"
        if ours.get("tokens_per_s") and ours_xla.get("tokens_per_s"):
            xla_ratio = f"{ours_xla['tokens_per_s'] / ours['tokens_per_s']:.2f}x"
        if dtype == "float32" and ours.get("tokens_per_s"):
            float32_speed[seq] = ours["tokens_per_s"]
        elif float32_speed.get(seq) and ours.get("tokens_per_s"):
            bf16_ratio = f"{ours['tokens_per_s'] / float32_speed[seq]:.2f}x"
        print(f"| {seq} | {batch} | {dtype} | {_fmt(ours, 'tokens_per_s', '{:.0f}')} | "
              f"{_fmt(ours_xla, 'tokens_per_s', '{:.0f}')} | {_fmt(peer, 'tokens_per_s', '{:.0f}')} | "
              f"{ratio(ours, 'tokens_per_s')} | {ratio(ours_xla, 'tokens_per_s')} | {xla_ratio} | "
              f"{bf16_ratio} | "
              f"{_fmt(ours, 'peak_rss_gb', '{:.2f}')} | {_fmt(ours_xla, 'peak_rss_gb', '{:.2f}')} | "
              f"{_fmt(peer, 'peak_rss_gb', '{:.2f}')} | {ratio(ours, 'peak_rss_gb')} | "
              f"{_fmt(ours, 'step_rss_gb', '{:.2f}')} | {_fmt(peer, 'step_rss_gb', '{:.2f}')} | "
              f"{ratio(ours, 'step_rss_gb')} |", flush=True)
        for r, name in ((ours, "ours"), (ours_xla, "ours XLA"), (peer_first, "PyTorch"),
                        (peer_last, "PyTorch (second run)")):
            if "error" in r:
                print(f"<!-- {name} {seq} {dtype}: {r['error']} -->")
        if seq == 512 and dtype == "float32" and ours.get("step_rss_gb"):
            memory_points[("base", False, 1)] = ours["step_rss_gb"]
    if rows:
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end of table 1", flush=True)
    if args.batch_table:
        _batch_table(common)
    if args.paired:
        _paired_table(common, args.rounds, args.paired_seqs, args.paired_ratios)
    if args.step_only:
        return 0

    print("\n## 2. Replica scaling on CPU (MirroredStrategy, 2 virtual devices, same global batch)\n")
    print("| seq | global batch | 1 replica tok/s | 2 replicas tok/s | speed-up |")
    print("|---|---|---|---|---|")
    one = measure(dict(common, impl="keras", seq=128, batch=4, dtype="float32"))
    two = measure(dict(common, impl="keras", seq=128, batch=4, dtype="float32", replicas=2))
    speedup = (two["tokens_per_s"] / one["tokens_per_s"]
               if "tokens_per_s" in one and "tokens_per_s" in two else None)
    print(f"| 128 | 4 | {_fmt(one, 'tokens_per_s', '{:.0f}')} | {_fmt(two, 'tokens_per_s', '{:.0f}')} | "
          f"{'-' if speedup is None else f'{speedup:.2f}x'} |", flush=True)

    if args.quick:
        return 0
    print("\n## 3. Largest per-replica batch at seq 512 (float32, AdamW, memory 384), estimated\n")
    print("| model | rematerialize | step GB batch 1 | step GB batch 2 | GB per example | 16 GB | 32 GB "
          "| 80 GB |")
    print("|---|---|---|---|---|---|---|---|")
    for size in ("base", "large"):
        for remat in (False, True):
            for batch in (1, 2):
                if (size, remat, batch) not in memory_points:
                    r = measure(dict(common, impl="keras", seq=512, batch=batch, dtype="float32",
                                     size=size, steps=0, remat=remat))
                    memory_points[(size, remat, batch)] = r.get("step_rss_gb")
            a, b = memory_points.get((size, remat, 1)), memory_points.get((size, remat, 2))
            if a is None or b is None:
                print(f"| {size} | {remat} | {a} | {b} | - | - | - | - |")
                continue
            per_example = max(b - a, 1e-6)
            fixed = a - per_example
            fits = [max(0, int((limit - fixed) // per_example)) for limit in (16, 32, 80)]
            print(f"| {size} | {remat} | {a:.2f} | {b:.2f} | {per_example:.2f} | {fits[0]} | "
                  f"{fits[1]} | {fits[2]} |", flush=True)
    return 0


def result_rows(section):
    """RESULTS.md rows: table 1c's interleaved ratios of the whole `fit` step (XLNet-Base)."""
    if "seq" not in section.header:
        return []
    return results_table.paired_rows(
        section, lambda r: f"pretraining fit step, XLNet-Base, seq {r['seq']}, batch {r['batch']}")


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
