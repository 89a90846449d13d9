"""SQuAD 2.0 null-score threshold search: hand-computed goldens, ties, and agreement with `squad_scores`."""

import random

import pytest

from xlnet_tf.metrics.squad_metrics import squad_scores
from xlnet_tf.metrics.squad_metrics import squad_v2_best_thresholds

# Five questions, sorted by null score. Raw scores if answered with the best span:
#   q1 null -3.0  gold "Paris"      pred "Paris"  exact 1  f1 1
#   q2 null -1.0  gold "red apple"  pred "apple"  exact 0  f1 2/3 (P 1, R 1/2)
#   q3 null  0.5  unanswerable      pred "blue"   answering costs its point
#   q4 null  1.0  gold "the cat"    pred "dog"    exact 0  f1 0
#   q5 null  2.0  unanswerable      pred "green"  answering costs its point
# Nothing answered: q3 + q5 = 2 points. Sweep F1: +q1 -> 3, +q2 -> 3.667, +q3 -> 2.667, +q4 -> 2.667,
# +q5 -> 1.667: best_f1 = 3.667 / 5 = 73.33 at threshold -1.0.
# Sweep exact: +q1 -> 3, +q2 -> 3 (no gain), then 2, 2, 1: best_exact = 3 / 5 = 60 at threshold -3.0.
# At threshold -1.0 (q1, q2 answered): HasAns exact (1 + 0 + 0) / 3 = 33.33, F1 (1 + 2/3 + 0) / 3 = 55.56;
# NoAns (q3, q5 unanswered) 100 / 100.
PREDICTIONS = {"q1": "Paris", "q2": "apple", "q3": "blue", "q4": "dog", "q5": "green"}
NULL_SCORES = {"q1": -3.0, "q2": -1.0, "q3": 0.5, "q4": 1.0, "q5": 2.0}
GOLDS = {"q1": ["Paris"], "q2": ["red apple"], "q3": [], "q4": ["the cat"], "q5": []}


def test_hand_computed_best_thresholds():
    result = squad_v2_best_thresholds(PREDICTIONS, NULL_SCORES, GOLDS)
    assert result["best_f1"] == pytest.approx(100 * (1 + 2 / 3 + 2) / 5)
    assert result["best_f1_thresh"] == -1.0
    assert result["best_exact"] == pytest.approx(60.0)
    assert result["best_exact_thresh"] == -3.0
    assert result["best_f1_has_answer_exact_match"] == pytest.approx(100 / 3)
    assert result["best_f1_has_answer_f1"] == pytest.approx(100 * (5 / 3) / 3)
    assert result["best_f1_no_answer_exact_match"] == 100.0
    assert result["best_f1_no_answer_f1"] == 100.0
    assert (result["has_answer_total"], result["no_answer_total"]) == (3, 2)


def test_equal_null_scores_move_together_and_all_unanswered_is_below_every_score():
    # qa gains a point and qb loses one at the same null score: answering both is no better
    # than answering none, so the threshold stays below 0.0 (the official sweep would say 100 at 0.0).
    result = squad_v2_best_thresholds({"qa": "x", "qb": "y", "qc": "z"}, {"qa": 0.0, "qb": 0.0, "qc": 5.0},
                                      {"qa": ["x"], "qb": [], "qc": []})
    assert result["best_f1"] == pytest.approx(200 / 3)
    assert result["best_f1_thresh"] < 0.0 and result["best_f1_thresh"] > -1e-6


def test_applying_the_threshold_reproduces_best_f1():
    rng = random.Random(0)
    words = ["red", "blue", "green", "cat", "dog"]
    predictions, null_scores, golds = {}, {}, {}
    for i in range(200):
        qid = f"q{i}"
        golds[qid] = [] if rng.random() < 0.4 else [" ".join(rng.sample(words, 2))]
        predictions[qid] = " ".join(rng.sample(words, rng.randint(1, 2)))
        null_scores[qid] = round(rng.uniform(-3, 3), 1)  # rounded: plenty of ties
    result = squad_v2_best_thresholds(predictions, null_scores, golds)
    for name in ("f1", "exact"):
        thresh = result[f"best_{name}_thresh"]
        applied = {q: p if null_scores[q] <= thresh else "" for q, p in predictions.items()}
        key = "f1" if name == "f1" else "exact_match"
        assert squad_scores(applied, golds)[key] == pytest.approx(result[f"best_{name}"])
    never = squad_scores({}, golds)
    assert result["best_f1"] >= never["f1"]


def test_missing_null_score_names_the_question():
    with pytest.raises(ValueError, match="q2"):
        squad_v2_best_thresholds({"q1": "a"}, {"q1": 0.0}, {"q1": ["a"], "q2": []})
