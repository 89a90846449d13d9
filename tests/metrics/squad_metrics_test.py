import pytest

from xlnet_tf.metrics import exact_match_score, f1_score_squad, normalize_answer, squad_scores


def test_official_normalisation():
    assert normalize_answer("  The  Cat's hat!") == "cats hat"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theory") == "theory"  # "the" only as a whole word


def test_exact_match_and_f1_goldens():
    assert exact_match_score("the Eiffel Tower.", "Eiffel tower") == 1.0
    # [cat, sat] vs [cat, sat, down]: precision 1, recall 2/3 -> F1 0.8
    assert f1_score_squad("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert f1_score_squad("dog", "cat") == 0.0
    assert f1_score_squad("", "") == 1.0 and f1_score_squad("", "cat") == 0.0


def test_squad_scores_take_the_best_gold_and_split_v2_kinds():
    golds = {"a": ["Paris", "the city of Paris"], "b": [], "c": ["1990"]}
    predictions = {"a": "city of Paris", "b": "", "c": "in 1991"}
    scores = squad_scores(predictions, golds)
    assert scores["exact_match"] == pytest.approx(100 * 2 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 1 + 0) / 3)
    assert scores["no_answer_exact_match"] == 100.0
    assert scores["has_answer_exact_match"] == pytest.approx(50.0)
