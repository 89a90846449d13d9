"""SQuAD exact match and F1 with the official normalisation (SQuAD 1.1 / 2.0 evaluation scripts).

Normalisation: lowercase, drop ASCII punctuation, drop the articles a/an/the,
collapse whitespace. F1 is over whitespace tokens of the normalised strings;
an example's score is the maximum over its gold answers; an unanswerable
question (no gold answer, SQuAD 2.0) scores 1 only for the empty prediction.
"""

import collections
import re
import string

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
