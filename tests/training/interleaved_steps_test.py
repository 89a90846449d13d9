"""benchmarks/interleaved_steps.py: the protocol, the round order, re-warm steps and failing workers.

The fake workers report the count of steps they have run as their "time", so
the assertions are exact and no test depends on the machine's speed.
"""

import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from benchmarks import interleaved_steps as steps  # noqa: E402

pytestmark = pytest.mark.subprocess

# Reports its own step count through `serve`, the real workers' loop; dies at step `die_at`.
COUNTING_WORKER = """
import sys
sys.path.insert(0, {root!r})
from benchmarks.interleaved_steps import StepServer
server, count = StepServer(), 0
server.ready()
while server.next_step():
    count += 1
    if count == {die_at}:
        sys.exit("worker died")
    server.report(count * {scale})
"""


def _worker(scale=1.0, die_at=0):
    code = COUNTING_WORKER.format(root=os.path.abspath(ROOT), die_at=die_at, scale=scale)
    return steps.spawn([sys.executable, "-c", code])


def test_rounds_time_one_step_per_worker_and_rewarm_steps_go_untimed():
    workers = {"a": _worker(), "b": _worker(scale=2.0)}
    assert steps.wait_ready(workers) == {}
    times = steps.run_rounds(workers, rounds=3, rewarm=1)
    # Each turn ran an untimed step first: the timed ones are every worker's 2nd, 4th and 6th.
    assert times == {"a": [2.0, 4.0, 6.0], "b": [4.0, 8.0, 12.0]}
    assert steps.paired_ratio(times["a"], times["b"]) == 0.5
    assert all(process.returncode == 0 for process in workers.values())  # stopped cleanly


def test_the_order_rotates_by_one_worker_each_round(tmp_path):
    log = tmp_path / "order.txt"
    code = (f"import sys; sys.path.insert(0, {os.path.abspath(ROOT)!r}); "
            "from benchmarks.interleaved_steps import serve; "
            f"serve(lambda: open({str(log)!r}, 'a').write(sys.argv[1]))")
    workers = {name: steps.spawn([sys.executable, "-c", code, name]) for name in "abc"}
    steps.wait_ready(workers)
    steps.run_rounds(workers, rounds=4)
    assert log.read_text() == "abc" + "bca" + "cab" + "abc"


def test_a_worker_that_dies_keeps_its_times_and_the_others_go_on():
    workers = {"dies": _worker(die_at=3), "lives": _worker()}
    steps.wait_ready(workers)
    times = steps.run_rounds(workers, rounds=4)
    assert times == {"dies": [1.0, 2.0], "lives": [1.0, 2.0, 3.0, 4.0]}


def test_a_worker_that_fails_before_ready_is_reported_with_its_error():
    broken = steps.spawn([sys.executable, "-c", "raise SystemExit('no model for you')"])
    workers = {"broken": broken, "fine": _worker()}
    failed = steps.wait_ready(workers)
    assert list(workers) == ["fine"]
    assert "no model for you" in failed["broken"]["error"]
    assert steps.run_rounds(workers, rounds=2) == {"fine": [1.0, 2.0]}


def test_serve_times_the_callable_it_is_given():
    code = (f"import sys, time; sys.path.insert(0, {os.path.abspath(ROOT)!r}); "
            "from benchmarks.interleaved_steps import serve; serve(lambda: time.sleep(0.05))")
    workers = {"sleeper": steps.spawn([sys.executable, "-c", code])}
    steps.wait_ready(workers)
    times = steps.run_rounds(workers, rounds=2)["sleeper"]
    assert len(times) == 2 and min(times) >= 0.05


def test_paired_ratio_is_the_median_of_same_round_ratios():
    # The second side caught a quick spell in round 3 alone: the median ignores it, the ratio of
    # the two minima (1.0 / 1.0) would not.
    assert steps.paired_ratio([1.0, 1.0, 1.0], [2.0, 2.0, 1.0]) == 0.5
    assert steps.paired_ratio([], []) is None


def test_both_orders_start_the_workers_reversed_in_the_second_pass(tmp_path):
    log = tmp_path / "starts.txt"

    def start(name):
        with open(log, "a") as f:
            f.write(name)
        return _worker(scale={"a": 1.0, "b": 4.0, "c": 2.0}[name])

    passes, failed = steps.run_in_both_orders(start, ["a", "b", "c"], rounds=2, rewarm=1)
    assert failed == {}
    assert log.read_text() == "abc" + "cba"
    # A fresh set of workers per pass: each pass's step counts start again from 1.
    assert passes == [{"a": [2.0, 4.0], "b": [8.0, 16.0], "c": [4.0, 8.0]},
                      {"c": [4.0, 8.0], "b": [8.0, 16.0], "a": [2.0, 4.0]}]
    assert steps.balanced_ratio(passes, "a", "b") == 0.25


def test_both_orders_report_a_worker_that_fails_to_start():
    def start(name):
        if name == "broken":
            return steps.spawn([sys.executable, "-c", "raise SystemExit('no model for you')"])
        return _worker()

    passes, failed = steps.run_in_both_orders(start, ["broken", "fine"], rounds=1)
    assert "no model for you" in failed["broken"]["error"]
    assert passes == [{"fine": [1.0]}, {"fine": [1.0]}]
    assert steps.balanced_ratio(passes, "fine", "broken") is None


def test_balanced_ratio_cancels_a_factor_tied_to_the_start_order():
    # The true ratio a / b is 0.8; whichever worker starts first runs 1.25x slow.
    first_pass = {"a": [1.25 * 0.8] * 3, "b": [1.0] * 3}
    second_pass = {"b": [1.25] * 3, "a": [0.8] * 3}
    assert steps.paired_ratio(first_pass["a"], first_pass["b"]) == pytest.approx(1.0)
    assert steps.paired_ratio(second_pass["a"], second_pass["b"]) == pytest.approx(0.64)
    assert steps.balanced_ratio([first_pass, second_pass], "a", "b") == pytest.approx(0.8)


def test_pooled_median_takes_one_workers_times_over_all_passes():
    passes = [{"a": [3.0, 1.0], "b": [9.0]}, {"a": [2.0]}]
    assert steps.pooled_median(passes, "a") == 2.0
    assert steps.pooled_median(passes, "b") == 9.0
    assert steps.pooled_median(passes, "missing") is None


def test_pair_summary_reads_the_start_order_from_each_pass():
    # The second pass started "a" first, so its figure comes first in `by_order`.
    passes = [{"b": [1.0, 1.0], "a": [0.5, 0.5]}, {"a": [2.0, 2.0], "b": [1.0, 1.0]}]
    row = steps.pair_summary(passes, "a", "b")
    assert row["by_order"] == [2.0, 0.5]
    assert row["ratio"] == pytest.approx(1.0)
    assert row["medians"] == [2.0, 1.0]
    assert steps.pair_summary([{"a": [1.0]}, {"a": [1.0]}], "a", "b") is None
