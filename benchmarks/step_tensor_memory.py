"""Peak tensor memory of the pretraining `fit` step, from TensorFlow's allocator: a figure that repeats.

`pretraining_benchmark.py` reports the process's peak RSS, which also counts
what the C library's allocator keeps after a free; between two runs of the
same code it moved by up to 0.11 GB (two modes, 3.01 and 3.10 GB at seq 128),
which hides changes of that size. Here each configuration runs in a fresh
process with TensorFlow's BFC allocator on the CPU (`TF_CPU_ALLOCATOR_USE_BFC`),
whose statistics count the bytes of live tensors: after one warm-up step the
peak is reset and the largest peak of the next steps is reported. "resident" is
what stays allocated between steps (weights, AdamW moments, recurrence memory);
"step" is the peak minus it. Reruns of one configuration agree to about 0.05 GB.

The model is XLNet-Base with the pretraining objective of
`pretraining_benchmark.py` (two streams, 85 predictions per 512 tokens, memory
3L/4 reused at L/2, dropout, AdamW with clipping and decay).

`--code DIR` measures another checkout (for example a `git worktree` of an older
commit), so the same script compares two versions of the code:

    git worktree add /tmp/old <commit>
    python benchmarks/step_tensor_memory.py --code /tmp/old
    python benchmarks/step_tensor_memory.py

Usage:
    python benchmarks/step_tensor_memory.py [--code DIR] [--steps 3] [--configs 128x2:float32,512x1:bfloat16]
"""

import argparse
import os
import re
import sys

import measurement
import results_table

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CONFIGS = "128x2:float32,128x2:bfloat16,512x1:float32,512x1:bfloat16"


def child(spec):
    """One configuration; prints `RESULT {json}`."""
    sys.path.insert(0, spec["code"])
    sys.path.append(HERE)
    import keras
    import tensorflow as tf

    from benchmarks.pretraining_benchmark import SIZES, make_batch

    measurement.limit_tensorflow_threads(2)
    try:  # the layout since 2026-11-25
        from xlnet_tf.models.xlnet_config import XLNetConfig
        try:
            from xlnet_tf.optimizers import build_optimizer
        except ImportError:  # checkouts before the one optimizer builder
            from xlnet_tf.optimizers import create_optimizer as build_optimizer
    except ImportError:  # older checkouts
        from xlnet_tf.config import XLNetConfig
        from xlnet_tf.training import create_optimizer as build_optimizer
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    length, batch = spec["seq"], spec["batch"]
    config = XLNetConfig(**SIZES["base"], memory_length=3 * length // 4, reuse_length=length // 2)
    dtype = "mixed_bfloat16" if spec["dtype"] == "bfloat16" else None
    model = XLNetPretrainer(XLNetBackbone(config, dtype=dtype))
    model.compile(optimizer=build_optimizer(model, learning_rate=1e-4, warmup_steps=1, train_steps=1000))
    model.enable_recurrence_memory(batch)
    dataset = tf.data.Dataset.from_tensors(make_batch(batch, length)).repeat()
    peaks, resident = [], []

    def after_step(step, logs):
        info = tf.config.experimental.get_memory_info("CPU:0")
        if step > 0:  # the first step builds the optimizer's moments and traces
            peaks.append(info["peak"] / 1e9)
            resident.append(info["current"] / 1e9)
        tf.config.experimental.reset_memory_stats("CPU:0")

    model.fit(dataset, steps_per_epoch=spec["steps"] + 1, epochs=1, verbose=0,
              callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=after_step)])
    measurement.report({"peak_gb": max(peaks), "resident_gb": min(resident)})


def measure(spec, timeout=1800):
    # The process finds the measured checkout's `xlnet_tf` (its working directory), not this one's.
    env = measurement.child_env(2, repository=False, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3",
                            KERAS_BACKEND="tensorflow")
    return measurement.measure_in_child(measurement.child_command(__file__, spec), env, timeout, cwd=spec["code"])


def parse_configs(text):
    """`"128x2:float32,512x1:bfloat16"` -> [(128, 2, "float32"), (512, 1, "bfloat16")]."""
    configs = []
    for item in text.split(","):
        try:
            shape, dtype = item.strip().split(":")
            seq, batch = (int(x) for x in shape.split("x"))
        except ValueError as error:
            raise SystemExit(f"--configs: {item!r} is not SEQxBATCH:DTYPE (e.g. 128x2:float32)") from error
        if dtype not in ("float32", "bfloat16"):
            raise SystemExit(f"--configs: dtype {dtype!r} in {item!r} is not float32 or bfloat16")
        configs.append((seq, batch, dtype))
    return configs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=HERE, help="the checkout to measure (default: this one)")
    parser.add_argument("--steps", type=int, default=3, help="measured steps after the warm-up step")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="SEQxBATCH:DTYPE, comma-separated")
    args = results_table.parse_arguments(parser, argv, child)
    if args is None:  # a measurement's own process
        return 0
    code = os.path.abspath(args.code)
    if not os.path.isdir(os.path.join(code, "xlnet_tf")):
        raise SystemExit(f"--code {code}: no xlnet_tf package in that folder")
    configs = parse_configs(args.configs)  # a bad --configs fails before any output
    print(f"## Peak tensor memory of the fit step (BFC allocator), code: {code}\n")
    print("| seq | batch | dtype | step peak GB | resident GB | step GB |")
    print("|---|---|---|---|---|---|")
    for seq, batch, dtype in configs:
        result = measure(dict(code=code, seq=seq, batch=batch, dtype=dtype, steps=args.steps))
        if "error" in result:
            print(f"| {seq} | {batch} | {dtype} | {result['error']} | | |", flush=True)
            continue
        print(f"| {seq} | {batch} | {dtype} | {result['peak_gb']:.3f} | {result['resident_gb']:.3f} | "
              f"{result['peak_gb'] - result['resident_gb']:.3f} |", flush=True)
    return 0


def result_rows(section):
    """RESULTS.md rows: the step's peak tensor memory per configuration, of this checkout's code only."""
    if "step peak GB" not in section.header or not re.search(r"code: (?:/\S*|this checkout)", section.context):
        return []
    # The rows are this checkout's, measured by the command without --code.
    command = next((c for c in results_table.commands(section.context) if "--code" not in c), "")
    return [results_table.Row(f"pretraining fit step peak tensor memory, XLNet-Base, seq {cells['seq']}, "
                              f"batch {cells['batch']}, {cells['dtype']}", "",
                              results_table.number(cells["step peak GB"]), "GB", command=command)
            for cells in results_table.measured(section, "step peak GB")]


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
