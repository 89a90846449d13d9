"""The exact-generation arithmetic count that bounds what a speed ratio can reach."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks import results_table  # noqa: E402  importable only after the sys.path insert above

arithmetic = results_table.load_script(os.path.join(results_table.BENCHMARKS, "generation_arithmetic.py"))

TOY = dict(vocabulary_size=10, num_layers=2, num_heads=1, head_dim=2, hidden_dim=2, intermediate_dim=4)


def test_ours_one_step_counted_by_hand():
    # Prompt 1, one new token: the static window is 2 columns, 4 relative distances.
    layer = 4 * 2 * 2 * 2 * 2 + 2 * 2 * 2 * 2 * 2 + 2 * 2 * 4 * 2 + 2 * 2 * 2 * 4 * 2  # q k v o, scores, ffn
    query = 4 * 2 * 2 * 2 + 2 * 2 * 2 * 2 + 2 * 2 * 4 + 2 * 2 * 2 * 4
    head = 2 * 2 * 10
    positions = 2 * (2 * 2 * 2 * 4)  # two layers, 4 distances projected once for the batch
    assert layer == 192 and query == 96
    for batch in (1, 2):
        expected = batch * (2 * (layer + query) + head) + positions
        assert arithmetic.call_flops("ours", batch, prompt=1, new=1, base=TOY) == expected


@pytest.mark.parametrize("batch", [1, 8])
def test_the_least_arithmetic_is_below_both_implementations(batch):
    least = arithmetic.call_flops("least", batch)
    ours = arithmetic.call_flops("ours", batch)
    hugging_face = arithmetic.call_flops("hugging_face", batch)
    assert least < ours < hugging_face
    # What the least skips is bounded: the static padding (about a tenth), the last layer's content
    # stream and layer 0's attention, not a different order of work.
    assert 0.7 < least / ours < 0.9


def test_the_work_grows_with_the_prompt_as_full_recomputation_does():
    # Every step recomputes every column: doubling the prompt about doubles a call's work.
    short, long = (arithmetic.call_flops("hugging_face", 1, prompt=p) for p in (128, 256))
    assert 1.9 < long / short < 2.3


def test_recorded_exact_rows_are_read_newest_first(tmp_path):
    path = tmp_path / "generation_benchmark_results.txt"
    path.write_text(
        "# 2026-11-27 newer\n"
        "| mode (HF) | batch | dtype | ours tokens/s | HF tokens/s | ours / HF (balanced) |\n"
        "|---|---|---|---|---|---|\n"
        "| exact (use_mems=False) | 1 | float32 | 5.00 | 3.00 | 1.60x |\n"
        "| cached (mems) | 1 | float32 | 24.00 | 7.00 | 3.50x |\n"
        "# 2026-11-26 older\n"
        "| mode (HF) | batch | dtype | ours tokens/s | HF tokens/s | ours / HF (balanced) |\n"
        "|---|---|---|---|---|---|\n"
        "| exact (use_mems=False) | 1 | float32 | 4.00 | 3.00 | 1.30x |\n"
        "| exact (use_mems=False) | 8 | bfloat16 (HF float32) | 10.00 | 4.00 | 2.50x |\n", encoding="utf-8")
    rows = arithmetic.recorded_exact_rows(str(path))
    assert rows == {(1, "float32"): (5.0, 3.0, "2026-11-27"), (8, "bfloat16"): (10.0, 4.0, "2026-11-26")}


def test_no_exact_rows_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "empty_results.txt"
    path.write_text("# nothing measured\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="empty_results.txt: no exact rows"):
        arithmetic.recorded_exact_rows(str(path))
