"""Implementations timed in turn, one step each per round, for ratios a drifting machine cannot skew.

On a shared VM the speed of the whole machine drifts by 10-20% over minutes, so
two implementations timed one after the other can differ by that much for no
reason of their own. Here every implementation is a long-lived worker process
that has built its model and warmed up; the driver then asks each in turn for
one timed step, round after round. Two steps of the same round ran seconds
apart, so the median over rounds of their ratio (`paired_ratio`) is the figure
to read.

The protocol, one line each: the worker prints `READY` once warmed up, then
for every `step` line on its stdin runs one step and prints `TIME <seconds>`.
A worker that fails prints `RESULT {"error": ...}` instead.

Example (a worker that speaks the protocol by hand; real ones call `serve`):
>>> import sys
>>> code = ("import sys; print('READY', flush=True); "
...         "[print('TIME 0.5', flush=True) for _ in sys.stdin]")
>>> workers = {"a": spawn([sys.executable, "-c", code]), "b": spawn([sys.executable, "-c", code])}
>>> wait_ready(workers)
{}
>>> times = run_rounds(workers, rounds=3)
>>> times["a"], paired_ratio(times["a"], times["b"])
([0.5, 0.5, 0.5], 1.0)
"""

import json
import math
import subprocess
import sys
import tempfile
import time


class StepServer:
    """The worker's side of the protocol, for loops that are not a plain callable (a `fit` callback)."""

    def ready(self):
        print("READY", flush=True)

    def next_step(self):
        """Blocks until the driver asks for a step; False when it asks the worker to stop."""
        return sys.stdin.readline().strip() == "step"

    def report(self, seconds):
        print(f"TIME {seconds}", flush=True)


def serve(step):
    """Runs `step()` once per `step` line on stdin, reporting each one's wall time."""
    server = StepServer()
    server.ready()
    while server.next_step():
        start = time.perf_counter()
        step()
        server.report(time.perf_counter() - start)


def spawn(command, env=None, cwd=None):
    """A worker process on pipes; its stderr goes to a file (a full pipe of log lines would block it)."""
    log = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                               text=True, env=env, cwd=cwd)
    process.log = log
    return process


def read_until(process, prefixes):
    """The worker's next line starting with one of `prefixes`; a `RESULT` error line if it exited first."""
    for line in process.stdout:
        if line.startswith(prefixes):
            return line.rstrip("\n")
    process.wait()
    process.log.seek(0)
    return "RESULT " + json.dumps({"error": process.log.read()[-300:] or "worker exited"})


def wait_ready(workers):
    """Waits for each worker's `READY`; removes and returns the ones that failed, as {name: result}."""
    failed = {}
    for name, process in list(workers.items()):
        line = read_until(process, ("READY", "RESULT "))
        if line.startswith("RESULT "):
            failed[name] = json.loads(line[len("RESULT "):])
            process.kill()
            del workers[name]
    return failed


def run_rounds(workers, rounds, rewarm=0):
    """`rounds` rounds of one timed step per worker, one worker busy at a time; returns {name: [seconds]}.

    The order rotates by one worker each round. With `rewarm`, each worker's
    turn starts with that many untimed steps: on this VM a training step right
    after the worker sat idle for a few seconds ran 10-15% slower for our model
    and 20-30% slower for PyTorch's (measured back to back against 6 s pauses),
    and a second step was back to full speed. The workers are stopped (stdin
    closed) at the end. A worker that dies mid-way keeps the times it reported.

    Neither removes a factor tied to a worker's place in the start order (the
    first-started ran 2-25% slow on this VM); `run_in_both_orders` cancels it.
    """
    times = {name: [] for name in workers}
    alive = dict(workers)
    for round_index in range(rounds):
        names = list(alive)
        # Each round starts one worker later, so no worker always comes first or after the same one.
        shift = round_index % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            process = alive[name]
            for _ in range(rewarm + 1):
                line = _one_step(process)
                if not line.startswith("TIME "):
                    del alive[name]
                    break
            else:
                times[name].append(float(line.split()[1]))
    for process in workers.values():
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
        process.wait()
    return times


def _one_step(process):
    try:
        process.stdin.write("step\n")
        process.stdin.flush()
    except BrokenPipeError:
        return "RESULT {}"
    return read_until(process, ("TIME ", "RESULT "))


def run_in_both_orders(start, names, rounds, rewarm=0):
    """Starts and times the workers twice, in the order of `names` and then reversed.

    `start(name)` returns a spawned worker. Each pass starts its workers one at a
    time (a load does not disturb another's timed steps), runs `run_rounds` and
    stops them, so at most one pass is alive. Returns `(passes, failed)`: the
    two passes' {name: [seconds]} and {name: error result} of the workers that
    failed before `READY` in either pass. Read the passes with `balanced_ratio`.

    Why: on this VM a worker's speed depended on its place in the start order
    by up to 30% (serving workers; a few % for `fit` workers), for as long as
    it lived, which neither the rotation nor re-warm steps remove. Between two
    workers, the reversed pass swaps their places.
    """
    return _run_in_orders(start, [list(names), list(reversed(names))], rounds, rewarm)


def run_in_one_order(start, names, rounds, rewarm=0):
    """`run_in_both_orders` with the order of `names` only: half the time, one pass (the start-order bias stays)."""
    return _run_in_orders(start, [list(names)], rounds, rewarm)


def _run_in_orders(start, orders, rounds, rewarm):
    passes, failed = [], {}
    for order in orders:
        workers = {}
        for name in order:
            process = start(name)
            result = wait_ready({name: process})
            if result:
                failed.update(result)
            else:
                workers[name] = process
        passes.append(run_rounds(workers, rounds, rewarm=rewarm))
    return passes, failed


def balanced_ratio(passes, top, bottom):
    """Geometric mean over `run_in_both_orders`' passes of `paired_ratio(top, bottom)`.

    A factor that a place in the start order puts on one side of a pair of
    workers is on the other side in the reversed pass, so it cancels. None when
    a pass lacks either side's times.
    """
    ratios = [paired_ratio(times.get(top, []), times.get(bottom, [])) for times in passes]
    if not ratios or None in ratios:
        return None
    return math.prod(ratios) ** (1.0 / len(ratios))


def pair_summary(passes, top, bottom):
    """A pair's figures for a table row, or None when a pass lacks either side's times.

    Returns {"ratio": `balanced_ratio`, "by_order": [the figure of the pass that
    started `top` first, then of the one that started `bottom` first], "medians":
    [`pooled_median` of top, of bottom]}. A pass's start order is the order of its
    keys (`run_rounds` keeps the workers' order).
    """
    ratio = balanced_ratio(passes, top, bottom)
    if ratio is None:
        return None
    by_order = sorted(passes, key=lambda times: list(times).index(top) > list(times).index(bottom))
    return {"ratio": ratio,
            "by_order": [paired_ratio(times[top], times[bottom]) for times in by_order],
            "medians": [pooled_median(passes, top), pooled_median(passes, bottom)]}


def pooled_median(passes, name):
    """The median of one worker's times over all passes (it carries each pass's place in the start order)."""
    pooled = sorted(t for times in passes for t in times.get(name, []))
    return pooled[len(pooled) // 2] if pooled else None


def paired_ratio(times, other_times):
    """Median over rounds of `times[i] / other_times[i]`: steps a round apart share the machine's state."""
    ratios = sorted(a / b for a, b in zip(times, other_times))
    return ratios[len(ratios) // 2] if ratios else None


if __name__ == "__main__":
    sys.exit("interleaved_steps is a library for the benchmarks; see its docstring.")
