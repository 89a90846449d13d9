"""SQuAD exact match and F1 with the official normalisation (SQuAD 1.1 / 2.0 evaluation scripts).

Normalisation: lowercase, drop ASCII punctuation, drop the articles a/an/the,
collapse whitespace. F1 is over whitespace tokens of the normalised strings;
an example's score is the maximum over its gold answers; an unanswerable
question (no gold answer, SQuAD 2.0) scores 1 only for the empty prediction.
"""

import collections
import re
import string

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lowercase, remove punctuation, articles and extra whitespace (official SQuAD normalisation)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction, gold):
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score_squad(prediction, gold):
    """Token-level F1 of one prediction against one gold answer."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        # SQuAD 2.0: empty vs empty is a match, empty vs non-empty is not.
        return float(prediction_tokens == gold_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions, gold_answers):
    """Exact match and F1 (in percent) over a set of questions.

    Args:
        predictions: dict `question_id -> predicted text` ("" = no answer).
        gold_answers: dict `question_id -> list of gold texts` (empty list = unanswerable).

    Returns:
        dict with `exact_match`, `f1` (percent), `total`, and for SQuAD 2.0 sets
        `has_answer_exact_match`/`has_answer_f1`/`no_answer_exact_match`/`no_answer_f1`
        when both kinds are present. A question without a prediction counts as "".
    """
    if not gold_answers:
        raise ValueError("squad_scores: no gold answers given.")
    em, f1, kinds = {}, {}, {}
    for qid, golds in gold_answers.items():
        prediction = predictions.get(qid, "")
        golds = [g for g in golds if normalize_answer(g)] or [""]
        kinds[qid] = "has_answer" if golds != [""] else "no_answer"
        em[qid] = max(exact_match_score(prediction, g) for g in golds)
        f1[qid] = max(f1_score_squad(prediction, g) for g in golds)
    total = len(gold_answers)
    result = {"exact_match": 100.0 * sum(em.values()) / total,
              "f1": 100.0 * sum(f1.values()) / total, "total": total}
    if len(set(kinds.values())) == 2:
        for kind in ("has_answer", "no_answer"):
            ids = [q for q, k in kinds.items() if k == kind]
            result[f"{kind}_exact_match"] = 100.0 * sum(em[q] for q in ids) / len(ids)
            result[f"{kind}_f1"] = 100.0 * sum(f1[q] for q in ids) / len(ids)
    return result


def squad_v2_best_thresholds(predictions, null_scores, gold_answers):
    """SQuAD 2.0 null-score threshold search (the official v2 script's `find_all_best_thresh`).

    Every question is answered with its best non-null span when its null score
    is at most the threshold, and left unanswered ("") otherwise. The sweep
    sorts the questions by null score and raises the threshold one score at a
    time, starting below all of them (everything unanswered), keeping the
    threshold with the highest total. As in the original `run_squad.py`, the
    null score is the answer-class logit (`SquadAnswer.null_score`; higher =
    less answerable), the quantity `null_score_threshold` is compared with
    at inference. Two choices make the returned threshold reproduce the score
    when applied: equal null scores move together, and when leaving every
    question unanswered is best the threshold is just below the smallest null
    score (the official script reports 0.0 there).

    Args:
        predictions: dict `question_id -> best non-null text` ("" when no span).
        null_scores: dict `question_id -> null score` (float).
        gold_answers: dict `question_id -> list of gold texts` (empty = unanswerable).

    Returns:
        dict (percent scores): `best_exact`, `best_exact_thresh`, `best_f1`,
        `best_f1_thresh`; at `best_f1_thresh` the `HasAns`/`NoAns` breakdown
        `best_f1_has_answer_exact_match`, `best_f1_has_answer_f1`,
        `best_f1_no_answer_exact_match`, `best_f1_no_answer_f1` (each only when
        that kind is present); `has_answer_total`, `no_answer_total`.

    Example:
    >>> from xlnet_tf.metrics.squad_metrics import squad_v2_best_thresholds
    >>> squad_v2_best_thresholds({"a": "Paris", "b": "x"}, {"a": -2.0, "b": 1.0},
    ...                          {"a": ["Paris"], "b": []})["best_f1_thresh"]
    -2.0
    """
    if not gold_answers:
        raise ValueError("squad_v2_best_thresholds: no gold answers given.")
    missing = sorted(set(gold_answers) - set(null_scores))
    if missing:
        raise ValueError(f"squad_v2_best_thresholds: no null score for question(s) {missing[:5]}.")
    has_answer, exact, f1 = {}, {}, {}
    for qid, golds in gold_answers.items():
        golds = [g for g in golds if normalize_answer(g)]
        has_answer[qid] = bool(golds)
        prediction = predictions.get(qid, "")
        if golds:
            exact[qid] = max(exact_match_score(prediction, g) for g in golds)
            f1[qid] = max(f1_score_squad(prediction, g) for g in golds)
        else:
            # Answering an unanswerable question costs its point; an empty span keeps it.
            exact[qid] = f1[qid] = float(not normalize_answer(prediction))
    result = {"has_answer_total": sum(has_answer.values()),
              "no_answer_total": len(has_answer) - sum(has_answer.values())}
    order = sorted(gold_answers, key=lambda q: float(null_scores[q]))
    total = len(order)
    for name, raw in (("exact", exact), ("f1", f1)):
        score, thresh = _sweep(order, null_scores, raw, has_answer)
        result[f"best_{name}"] = 100.0 * score / total
        result[f"best_{name}_thresh"] = thresh
    answered = {q: float(null_scores[q]) <= result["best_f1_thresh"] for q in order}
    for kind, wanted in (("has_answer", True), ("no_answer", False)):
        ids = [q for q in order if has_answer[q] == wanted]
        if ids:
            result[f"best_f1_{kind}_exact_match"] = 100.0 * sum(
                exact[q] if answered[q] else float(not wanted) for q in ids) / len(ids)
            result[f"best_f1_{kind}_f1"] = 100.0 * sum(
                f1[q] if answered[q] else float(not wanted) for q in ids) / len(ids)
    return result


def _sweep(order, null_scores, raw, has_answer):
    """Best total score and its threshold; `order` sorted by null score."""
    # Below every null score nothing is answered: each unanswerable question scores 1.
    score = best = float(sum(not has_answer[q] for q in order))
    thresh = float(np.nextafter(float(null_scores[order[0]]), -np.inf))
    for i, qid in enumerate(order):
        # Answering: an answerable question gains its raw score, an unanswerable one loses
        # its point unless the best span is empty anyway (raw 1).
        score += raw[qid] if has_answer[qid] else raw[qid] - 1.0
        last_of_tie = i + 1 == len(order) or float(null_scores[order[i + 1]]) != float(null_scores[qid])
        if last_of_tie and score > best:
            best, thresh = score, float(null_scores[qid])
    return best, thresh
