"""benchmarks/long_document_benchmark.py in small: its figures, and a tiny run of the whole pipeline."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, REPO)

from benchmarks import long_document_benchmark as ldb  # noqa: E402


def test_document_is_consecutive_full_segments_identical_for_both_sides():
    features = ldb.document(num_segments=3, segment_length=8, vocabulary_size=50)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert features[key].shape == (1, 3, 8) and features[key].dtype == np.int32
    assert features["padding_mask"].min() == 1  # every position real: no segment is skipped
    assert 10 <= features["token_ids"].min() and features["token_ids"].max() < 50
    np.testing.assert_array_equal(features["token_ids"],
                                  ldb.document(3, 8, 50)["token_ids"])  # same seed, same document


def test_linearity_figures_and_best_of_two_runs():
    rows = [dict(impl="ours", tokens=512, seconds=2.0, run_rss=900.0),
            dict(impl="ours", tokens=8192, seconds=40.0, run_rss=950.0),
            dict(impl="ours", tokens=2048, error="timeout")]
    figures = ldb.linearity(rows, "ours")
    assert (figures["short"], figures["long"]) == (512, 8192)
    assert figures["time_per_length"] == pytest.approx(40.0 / 2.0 / 16)
    assert figures["memory_growth"] == pytest.approx(50.0)
    assert ldb.linearity(rows, "torch") is None

    first = dict(seconds=3.0, peak_rss=1200.0, run_rss=950.0)
    second = dict(seconds=2.5, peak_rss=1100.0, run_rss=960.0)
    best = ldb.best_of(first, second)
    assert best["seconds"] == 2.5 and best["peak_rss"] == 1200.0 and best["run_rss"] == 960.0
    assert ldb.best_of({"error": "x"}, second) is second


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.subprocess
def test_quick_run_measures_both_sides_at_every_length(tmp_path):
    """The tiny model at 1 and 4 segments, ours and PyTorch: every row measured, report and JSON written."""
    # The PyTorch side needs the test extras' torch and transformers (CI's second pass has neither).
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    report, figures = tmp_path / "report.txt", tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "long_document_benchmark.py"), "--quick",
         "--lengths", "512", "2048", "--impls", "torch", "ours", "--output", str(report),
         "--json", str(figures)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(figures.read_text())
    rows = {(r["impl"], r["tokens"]): r for r in result["rows"]}
    assert sorted(rows) == [("ours", 512), ("ours", 2048), ("torch", 512), ("torch", 2048)]
    for (_, tokens), row in rows.items():
        assert "error" not in row, row
        assert row["segments"] == tokens // 512 and len(row["passes"]) == 1
        assert row["tokens_per_s"] == pytest.approx(tokens / row["seconds"])
        assert row["segment_s"] == pytest.approx(row["seconds"] / row["segments"])
        assert 0 < row["run_rss"] < row["peak_rss"]
    assert rows[("torch", 512)]["runs"] == 2  # PyTorch ran before and after ours
    for impl in ("torch", "ours"):
        linear = result["linearity"][impl]
        assert (linear["short"], linear["long"]) == (512, 2048)
        assert math.isfinite(linear["time_per_length"]) and linear["time_per_length"] > 0
        # A 2 x 64 model: four segments may not hold hundreds of MiB more than one (generous bound).
        assert linear["memory_growth"] < 256
    text = report.read_text()
    assert "ratio ours tf.function / PyTorch" in text and "| ours tf.function | 512 -> 2048 |" in text
