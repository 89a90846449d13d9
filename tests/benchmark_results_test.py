"""`benchmarks/RESULTS.md`: written by the benchmark scripts, every row naming a command that exists."""

import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks import results_table  # noqa: E402  importable only after the sys.path insert above

PAIRED_REPORT = """\
# 2026-11-20: python benchmarks/backbone_benchmark.py --paired --modes train --rounds 5

| mode | seq | ratio | balanced | by order | median step s |
|---|---|---|---|---|---|
| train | 128 | ours / PyTorch, float32 (speed) | **1.45x** | 1.48x / 1.42x | 1.369 / 0.949 |
| train | 128 | XLA / no XLA, float32 (step time) | **1.03x** | 1.00x / 1.07x | 1.41 / 1.32 |

load average 1.9 at end

# 2026-11-19: python benchmarks/backbone_benchmark.py --paired --rounds 3

| mode | seq | ratio | balanced | by order | median step s |
|---|---|---|---|---|---|
| train | 128 | ours / PyTorch, float32 (speed) | **1.30x** | 1.3x / 1.3x | 1 / 1 |
| infer | 512 | ours / PyTorch, float32 (speed) | **1.70x** | 1.7x / 1.7x | 1 / 1 |
"""


def _backbone_rows(section):
    return results_table.paired_rows(section, lambda r: f"backbone {r['mode']}, seq {r['seq']}")


def test_every_row_names_a_command_that_exists():
    rows = results_table.read_rows(results_table.RESULTS_FILE)
    assert len(rows) >= 40
    for row in rows:
        assert row.date and row.machine, row
        results_table.check_command(row.command)


@pytest.mark.parametrize("command, message", [
    ("python benchmarks/no_such_benchmark.py", "benchmarks/no_such_benchmark.py does not exist"),
    ("python benchmarks/serving_benchmark.py --no-such-flag", "unrecognized arguments: --no-such-flag"),
    ("python benchmarks/serving_benchmark.py --seq twelve", "invalid int value: 'twelve'"),
    ("bash run.sh", "expected `python benchmarks/NAME.py FLAGS`"),
])
def test_a_command_that_does_not_exist_or_parse_is_refused(command, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        results_table.check_command(command)


def test_rows_of_a_report_are_the_newest_run_of_each_comparison_with_its_date_command_and_load():
    rows = {row.comparison: row for row in results_table.rows_from_report(PAIRED_REPORT, _backbone_rows)}
    assert sorted(rows) == ["backbone infer, seq 512: ours / PyTorch, float32",
                            "backbone train, seq 128: XLA / no XLA, float32",
                            "backbone train, seq 128: ours / PyTorch, float32"]
    newest = rows["backbone train, seq 128: ours / PyTorch, float32"]
    assert (newest.ratio, newest.measure, newest.against) == (1.45, "speed", "Hugging Face PyTorch")
    assert newest.date == "2026-11-20"
    assert newest.command == "python benchmarks/backbone_benchmark.py --paired --modes train --rounds 5"
    assert newest.machine == "2-core AMD EPYC VM, CPU only, load average 1.9"
    xla = rows["backbone train, seq 128: XLA / no XLA, float32"]
    assert (xla.measure, xla.against) == ("time", "no XLA, float32")
    older = rows["backbone infer, seq 512: ours / PyTorch, float32"]
    not_recorded = "2-core AMD EPYC VM, CPU only, load average not recorded"
    assert (older.ratio, older.date, older.machine) == (1.70, "2026-11-19", not_recorded)


def test_upsert_replaces_the_same_comparison_keeps_the_others_and_leaves_no_temporary(tmp_path):
    pytest.importorskip("matplotlib")
    path = str(tmp_path / "RESULTS.md")
    first = [results_table.Row("a", "Hugging Face PyTorch", 1.5, "speed", "2026-11-01", "m", "python x.py"),
             results_table.Row("b", "Hugging Face PyTorch", 0.5, "time", "2026-11-01", "m", "python x.py")]
    results_table.upsert(first, path)
    results_table.upsert([results_table.Row("a", "Hugging Face PyTorch", 2.0, "speed", "2026-11-02", "n",
                                            "python x.py --again")], path)
    rows = {row.comparison: row for row in results_table.read_rows(path)}
    assert rows["a"] == results_table.Row("a", "Hugging Face PyTorch", 2.0, "speed", "2026-11-02", "n",
                                          "python x.py --again")
    assert rows["b"] == first[1]
    assert sorted(os.listdir(tmp_path)) == ["RESULTS.md", "results.png"]
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.startswith(results_table.METHOD) and "| a | Hugging Face PyTorch | 2.00x the speed |" in text


def test_chart_shows_each_main_ratio_as_speed_and_is_not_blank(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib import image

    rows = [results_table.Row("step", "Hugging Face PyTorch", 2.0, "speed"),
            results_table.Row("latency", "Hugging Face PyTorch", 0.5, "time"),
            results_table.Row("latency, strings", "Hugging Face PyTorch", 0.5, "time"),
            results_table.Row("bf16", "our float32", 1.4, "speed"),
            results_table.Row("memory", "", 2.1, "GB")]
    assert results_table.chart_rows(rows) == [("step", 2.0), ("latency", 2.0)]
    path = str(tmp_path / "chart.png")
    results_table.draw_chart(rows, path)
    pixels = image.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 500
    assert pixels.std() > 0.05  # bars and labels, not one flat colour


def test_results_md_is_what_the_scripts_write_from_their_results_files(tmp_path, monkeypatch):
    """The committed table is the scripts' output, not an edited copy."""
    monkeypatch.setattr(results_table, "draw_chart", lambda rows, path: None)  # the chart has its own test
    committed = {row.key: row for row in results_table.read_rows(results_table.RESULTS_FILE)}
    path = str(tmp_path / "RESULTS.md")
    recorded = sorted(f for f in os.listdir(results_table.BENCHMARKS) if f.endswith("_results.txt"))
    assert len(recorded) >= 9
    for results in recorded:
        script = results[:-len("_results.txt")]
        module = results_table.load_script(os.path.join(results_table.BENCHMARKS, script + ".py"))
        argv = ["--write-results", path, "--from-results-file", os.path.join(results_table.BENCHMARKS, results)]
        assert results_table.run(module.main, module.__file__, module.result_rows, argv) == 0
    rebuilt = {row.key: row for row in results_table.read_rows(path)}
    assert committed == rebuilt


def test_from_results_file_names_a_missing_file(tmp_path):
    with pytest.raises(SystemExit, match="--from-results-file .*nothing.txt: no such file"):
        results_table.run(lambda: 0, "benchmarks/serving_benchmark.py", lambda s: [],
                          ["--from-results-file", str(tmp_path / "nothing.txt")])


def test_the_method_section_holds_no_history():
    with open(results_table.RESULTS_FILE, encoding="utf-8") as f:
        method = f.read().split("## Results", 1)[0]
    assert "## Method" in method
    assert not any(word in method.lower() for word in ("earlier", "before the", "used to", "was measured"))



def test_the_readme_shows_ratios_of_the_results_table():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"(\d+\.\d+)x", section)
    assert len(shown) >= 8
    measured = {f"{row.ratio:.2f}" for row in results_table.read_rows(results_table.RESULTS_FILE)}
    assert set(shown) <= measured, set(shown) - measured
