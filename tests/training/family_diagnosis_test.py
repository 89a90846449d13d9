"""benchmarks/family_diagnosis.py: where a family run's scores stand against parts of the blanket and counting."""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from benchmarks import family_diagnosis  # noqa: E402
from benchmarks import learning_benchmark as lb  # noqa: E402

SPEC = {"name": "small-2nd-order", "num_words": 8, "successors": 2, "syllables": [1, 3], "vocab_size": 34,
        "sentence_words": 6, "order": 2, "tail": 0.1}


def _family_run(tmp_path, words=4_000):
    """A family workdir as a run leaves it: its corpus, vocabulary and one row."""
    from xlnet_tf.tokenizer_training import train_vocabulary

    language = lb.family_language(SPEC)
    data = tmp_path / "run" / SPEC["name"] / "data"
    data.mkdir(parents=True)
    stream = language.sample(words, np.random.default_rng(0))
    language.write_text(str(data / "train.txt"), stream, words_per_line=6)
    train_vocabulary(str(data / "train.txt"), 34, str(data / "spiece.model"), character_coverage=1.0,
                     num_threads=1, seed=0)
    row = {"language": SPEC, "seed": 0, "chain": 1.0, "heldout_bound_given_pieces": 0.5}
    (tmp_path / "run" / "family_rows.jsonl").write_text(json.dumps(row) + "\n")
    return language, stream, str(data / "spiece.model")


def test_a_rows_diagnosis_is_its_languages_exact_figures_and_its_corpus_count_model(tmp_path, capsys):
    language, stream, vocabulary = _family_run(tmp_path)
    counts = [len(s) for s in lb.spell_words(vocabulary, language.words)]
    output = tmp_path / "diagnosis.txt"
    assert family_diagnosis.main(["--workdir", str(tmp_path / "run"), "--output", str(output)]) == 0
    [diagnosis] = [family_diagnosis.diagnose_row(json.loads((tmp_path / "run" / "family_rows.jsonl").read_text()),
                                                 str(tmp_path / "run"))]
    bound = language.entropies(piece_counts=counts)["both_sides_given_pieces"]
    assert diagnosis["bound"] == pytest.approx(bound, abs=1e-12)
    assert diagnosis["model_ratio"] == pytest.approx(2.0)
    # Reading more of the blanket never tells less; the word two away tells something in an order-2 chain.
    assert diagnosis["bound"] < diagnosis["three"] < diagnosis["two"]
    assert diagnosis["two"] == pytest.approx(language.entropy_given((-1, 1), counts), abs=1e-12)
    # The count model is the corpus' own: the stream the run trained on, not a fresh draw.
    assert (diagnosis["count_model"], diagnosis["weight"]) == lb.count_model_score(language, stream, counts)
    assert bound < diagnosis["count_model"] < diagnosis["two"]
    printed = capsys.readouterr().out
    assert f"| small-2nd-order | 0 | 1.000 (2.00x) | {bound:.3f} |" in printed
    written = output.read_text()
    assert written.startswith("# ") and "family_diagnosis.py --workdir" in written and "| small-2nd-order |" in written
    # RESULTS.md: one row per language, the count model over the exact bound, as the table prints it.
    from benchmarks import results_table

    [section] = [s for s in results_table.sections(written) if s.rows]
    [row] = family_diagnosis.result_rows(section)
    assert row.against == "exact entropy bound" and "small-2nd-order language's training corpus" in row.comparison
    assert row.ratio == pytest.approx(round(diagnosis["count_model"] / bound, 2))


def test_a_missing_or_foreign_corpus_is_named(tmp_path):
    _family_run(tmp_path, words=600)
    corpus = tmp_path / "run" / SPEC["name"] / "data" / "train.txt"
    corpus.write_text(corpus.read_text() + "\nzzqq\n")
    with pytest.raises(SystemExit, match=r"--workdir .*train.txt: 1 word\(s\) are not the language's, e.g. \['zzqq'\]"):
        family_diagnosis.main(["--workdir", str(tmp_path / "run")])
    os.remove(corpus)
    with pytest.raises(SystemExit, match=r"--workdir .*small-2nd-order/data/train.txt does not exist: the "
                                         r"small-2nd-order row"):
        family_diagnosis.main(["--workdir", str(tmp_path / "run")])
    with pytest.raises(SystemExit, match=r"family_rows.jsonl does not exist; give the --workdir of a"):
        family_diagnosis.main(["--workdir", str(tmp_path / "nowhere")])
