"""The benchmarks' harness for measuring: a measurement in a fresh process, timed steps, the peer's model.

Every benchmark script measures through this module, times pairs of long-lived workers taking turns
through `interleaved_steps` (ratios the machine's drift cannot move) and names its results through
`results_table` (the rows of `RESULTS.md`): one harness in three modules.

A script measures each setting in a fresh process of itself, so the peak RSS belongs to that measurement
alone and neither framework is imported into the other's process. The driver calls
`measure_in_child(child_command(__file__, spec), child_env(...))`; in the child,
`results_table.parse_arguments` hands `--child SPEC` to the script's `child(spec)`, which ends with
`report(result)`: one `RESULT {json}` line, the one line the driver reads.

Both sides get the same threads (`limit_tensorflow_threads`, `limit_torch_threads`: intra-op as asked,
inter-op 1), the same sizes (`XLNET_BASE`, and `hugging_face_config` for the peer, Hugging Face's PyTorch
XLNet) and the same timing (`time_calls`: wall time of each call; scripts report the fastest, since load
from other jobs only ever slows a step down).

Example:
>>> seconds = time_calls(lambda: sum(range(1000)), 3)
>>> len(seconds), min(seconds) >= 0
(3, True)
>>> hugging_face_config(XLNET_BASE, dropout=0.0).d_model  # doctest: +SKIP
768
"""

import json
import os
import resource
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = "RESULT "
# XLNet-Base's shapes, in `XLNetConfig`'s keys; the benchmarks' weights are random, since neither speed
# nor memory depends on their values.
XLNET_BASE = dict(vocabulary_size=32000, num_layers=12, num_heads=12, head_dim=64, hidden_dim=768,
                  intermediate_dim=3072)
# OpenMP's spinning barriers slow PyTorch down on a shared, busy machine (twice as slow in the backbone
# benchmark's runs), which would flatter our ratios: its processes wait passively.
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}


def child_command(script, spec):
    """The command that runs `script`'s `child(spec)` in a fresh process."""
    return [sys.executable, os.path.abspath(script), "--child", json.dumps(spec)]


def child_env(threads=None, *, repository=True, **variables):
    """A measurement process's environment: CPU only, TensorFlow's start-up lines hidden.

    Args:
        threads: OpenMP's threads (`OMP_NUM_THREADS`), or None to leave them as they are.
        repository: put the repository first on `PYTHONPATH` (so the process finds `xlnet_tf` and
            `benchmarks`); False leaves `PYTHONPATH` alone.
        **variables: more variables, or replacements (`TF_CPP_MIN_LOG_LEVEL="3"`, `PASSIVE_WAIT`).
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if repository:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    env.update(variables)
    return env


def measure_in_child(command, env, timeout=None, cwd=None):
    """Runs one measurement's process; its `RESULT` dict, or `{"error": ...}` naming why there is none."""
    try:
        process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout}s"}
    for line in process.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    lines = (process.stderr or process.stdout).strip().splitlines()
    return {"error": f"exit {process.returncode}: {lines[-1] if lines else 'no output'}"}


def report(result):
    """The measurement process's answer: one `RESULT {json}` line on stdout."""
    print(RESULT + json.dumps(result), flush=True)


def report_error(error):
    """A measurement that failed, reported in its table row rather than stopping the other rows."""
    report({"error": f"{type(error).__name__}: {error}"[:300]})


def peak_rss_bytes():
    """This process's peak resident memory so far (`ru_maxrss`, which Linux reports in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def time_calls(call, repeats):
    """The wall time in seconds of each of `repeats` calls of `call()`, one after another."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def limit_tensorflow_threads(threads):
    """TensorFlow's intra-op threads as the peer gets them, inter-op 1; call before TensorFlow runs an op."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def limit_torch_threads(threads):
    """PyTorch's intra-op threads as ours get them, inter-op 1, and its random seed fixed; returns `torch`."""
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    return torch


def hugging_face_config(size, **settings):
    """Hugging Face's `XLNetConfig` of our `size` (`XLNET_BASE`'s keys), GELU feed-forward, plus `settings`."""
    import transformers

    return transformers.XLNetConfig(
        vocab_size=size["vocabulary_size"], d_model=size["hidden_dim"], n_layer=size["num_layers"],
        n_head=size["num_heads"], d_inner=size["intermediate_dim"], ff_activation="gelu", **settings)


def pair_cells(row, digits=2):
    """A `interleaved_steps.pair_summary` as table cells: `**ratio** | by order | median step s`."""
    by_order, medians = row["by_order"], row["medians"]
    return (f"**{row['ratio']:.2f}x** | {by_order[0]:.2f}x / {by_order[1]:.2f}x | "
            f"{medians[0]:.{digits}f} / {medians[1]:.{digits}f}")


# The columns `pair_cells` fills: the "time-numerator side" is the worker whose step time is on top
# (PyTorch, for ours / PyTorch's speed).
PAIR_COLUMNS = ("ratio | balanced | by order (time-numerator side started first / other first) | "
                "median step s (time-numerator side / other side)")


if __name__ == "__main__":
    sys.exit("measurement is a library for the benchmarks; see its docstring.")
