"""Generation speed: `XLNetCausalLM.generate` next to Hugging Face's `XLNetLMHeadModel.generate`.

XLNet-Base sizes with random weights (no download), a 128-token prompt, 32 new
tokens (greedy, no stop token), batch 1 and 8, float32 and bfloat16, on CPU.
Two pairs per configuration:

- `cached` (memory, recompute window 2) next to Hugging Face's mems path
  (`use_mems=True`, its `offset = 2`), the same computation;
- `exact` (the whole sequence each step) next to `use_mems=False`.

Hugging Face's XLNet fails in bfloat16 (its relative position embedding stays
float32 and meets the bfloat16 weights in a matmul), so a bfloat16 row pairs
ours in bfloat16 with Hugging Face in float32 (the table says so).

Each pair is two long-lived workers taking turns, one whole `generate` call
each per round, started in both orders (`interleaved_steps.run_in_both_orders`);
the figure is the balanced ratio of tokens/s (ours over Hugging Face's), which
neither the machine's drift nor the start order can move. Ours runs the loop
as one `tf.function` the way `generate` runs by default: Keras leaves XLA off
on CPU (`--xla` turns it on). On CPU that matters in bfloat16: XLA's CPU
backend has no bfloat16 matrix kernels of its own, so an XLNet-Base forward
pass at batch 8 took 2.4 CPU seconds with XLA against 1.4 without (float32:
2.4 either way).

Example:
    python benchmarks/generation_benchmark.py                  # every configuration
    python benchmarks/generation_benchmark.py --batch 1 --dtype float32 --rounds 3
    python benchmarks/generation_benchmark.py --batch 8 --mode cached --orders 1   # one start order only
    python benchmarks/generation_benchmark.py --batch 1 --xla                      # ours compiled with XLA
    python benchmarks/generation_benchmark.py --mode cached --ours-only            # ours alone, no Hugging Face
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interleaved_steps  # noqa: E402
import measurement  # noqa: E402
import results_table  # noqa: E402

PROMPT, NEW_TOKENS = 128, 32
BASE = measurement.XLNET_BASE


def prompts(batch):
    import numpy as np

    return np.random.default_rng(0).integers(9, BASE["vocabulary_size"], (batch, PROMPT)).astype("int32")


def ours_step(mode, batch, dtype, xla):
    """One `generate` call of ours, ready to time (built and warmed up); `xla` False: Keras's default on CPU."""
    import keras
    import numpy as np

    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
    from xlnet_tf.models.xlnet_config import XLNetConfig

    keras.utils.set_random_seed(0)
    backbone = XLNetBackbone(XLNetConfig(**BASE, dropout=0.0, attention_dropout=0.0), dtype=dtype)
    model = XLNetCausalLM(backbone, mode=mode)
    model.jit_compile = xla
    ids = np.concatenate([prompts(batch), np.full((batch, NEW_TOKENS), 5, "int32")], axis=1)
    mask = (np.arange(PROMPT + NEW_TOKENS) < PROMPT)[None].repeat(batch, 0).astype("int32")

    def step():
        out = model.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        assert out["padding_mask"].sum() == batch * (PROMPT + NEW_TOKENS)

    return step


def hugging_face_step(use_mems, batch, dtype):
    """One `generate` call of Hugging Face's, ready to time."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = measurement.hugging_face_config(BASE, dropout=0.0, mem_len=None)
    model = transformers.XLNetLMHeadModel(config).eval().to(getattr(torch, dtype))
    ids = torch.tensor(prompts(batch), dtype=torch.long)

    def step():
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                 use_mems=use_mems, pad_token_id=5, eos_token_id=None)
        assert out.shape == (batch, PROMPT + NEW_TOKENS)

    return step


def hugging_face_dtype(dtype):
    """Hugging Face's XLNet fails in bfloat16 (float32 position embedding against bfloat16 weights): float32."""
    return "float32" if dtype == "bfloat16" else dtype


def worker(args):
    try:
        if args.side == "ours":
            step = ours_step(args.mode, args.batch, "bfloat16" if args.dtype == "bfloat16" else "float32",
                             args.xla)
        else:
            step = hugging_face_step(args.mode == "cached", args.batch, hugging_face_dtype(args.dtype))
        for _ in range(2 if args.side == "ours" else 1):  # Ours: tracing / compiling, then one warm call.
            step()
    except Exception as error:  # The driver prints it in the table.
        measurement.report_error(error)
        return 1
    interleaved_steps.serve(step)
    return 0


def start_worker(side, mode, batch, dtype, xla):
    command = [sys.executable, os.path.abspath(__file__), "--worker", side, "--mode", mode, "--batch", str(batch),
               "--dtype", dtype]
    if xla:
        command.append("--xla")
    return interleaved_steps.spawn(command, env=measurement.child_env(repository=False))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", dest="side", choices=("ours", "hf"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("exact", "cached"), default=None)
    parser.add_argument("--batch", type=int, nargs="*", default=None)
    parser.add_argument("--dtype", nargs="*", choices=("float32", "bfloat16"), default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--orders", type=int, choices=(1, 2), default=2,
                        help="2: both start orders (balanced); 1: ours started first only (half the time)")
    parser.add_argument("--xla", action="store_true", help="compile ours with XLA (default: as Keras does on CPU, "
                        "without)")
    parser.add_argument("--ours-only", action="store_true",
                        help="time ours alone (no Hugging Face worker, no ratio): a quick before / after check")
    results_table.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.side:
        args.batch, args.dtype = args.batch[0], args.dtype[0]
        return worker(args)
    orders = 1 if args.ours_only else args.orders
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} cores; XLNet-Base random weights, prompt {PROMPT}, {NEW_TOKENS} new tokens, greedy; "
          f"ours {'with' if args.xla else 'without'} XLA; {args.rounds} rounds per order, "
          f"{orders} start order{'s' if orders == 2 else ''}")
    print("| mode (HF) | batch | dtype | ours tokens/s | HF tokens/s | ours / HF (balanced) |")
    print("|---|---|---|---|---|---|")
    for batch in args.batch or (1, 8):
        for dtype in args.dtype or ("float32", "bfloat16"):
            for mode in [args.mode] if args.mode else ("cached", "exact"):
                def start(side, mode=mode, batch=batch, dtype=dtype):
                    return start_worker(side, mode, batch, dtype, args.xla)

                names = ["ours"] if args.ours_only else ["ours", "hf"]
                if orders == 2:
                    passes, failed = interleaved_steps.run_in_both_orders(start, names, args.rounds)
                else:
                    passes, failed = interleaved_steps.run_in_one_order(start, names, args.rounds)
                label = f"{mode} ({'mems' if mode == 'cached' else 'use_mems=False'})"
                if failed:
                    print(f"| {label} | {batch} | {dtype} | failed: {json.dumps(failed)} | | |", flush=True)
                    continue
                tokens = batch * NEW_TOKENS
                ours = tokens / interleaved_steps.pooled_median(passes, "ours")
                if args.ours_only:
                    print(f"| {label} | {batch} | {dtype} | {ours:.2f} | - | - |", flush=True)
                    continue
                theirs = tokens / interleaved_steps.pooled_median(passes, "hf")
                ratio = interleaved_steps.balanced_ratio(passes, "hf", "ours")  # time(HF) / time(ours)
                dtypes = dtype if hugging_face_dtype(dtype) == dtype else f"{dtype} (HF {hugging_face_dtype(dtype)})"
                print(f"| {label} | {batch} | {dtypes} | {ours:.2f} | {theirs:.2f} | {ratio:.2f}x |", flush=True)
    return 0


def result_rows(section):
    """RESULTS.md rows: ours / Hugging Face tokens/s per mode, batch and dtype (XLNet-Base, prompt 128, 32 new)."""
    if "mode (HF)" not in section.header:
        return []
    rows = []
    for cells in results_table.measured(section, section.header[-1]):
        mode, batch, dtype = cells["mode (HF)"].split()[0], cells["batch"], cells["dtype"]
        # A run of one row per command names each command; the row's own is the one with its flags.
        flags = (f"--batch {batch} ", f"--dtype {dtype.split()[0]} ", f"--mode {mode}")
        own = [c for c in results_table.commands(section.context) if all(f in c + " " for f in flags)]
        rows.append(results_table.Row(
            f"generate {mode}, XLNet-Base, batch {batch}, {dtype}: ours / Hugging Face tokens/s",
            "Hugging Face PyTorch", results_table.number(cells[section.header[-1]]), "speed",
            command=own[0] if own else ""))
    return rows


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
