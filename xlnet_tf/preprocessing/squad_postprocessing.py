"""SQuAD post-processing: the span labeler's beam outputs -> exact answer text of the passage."""

import collections

import numpy as np

SquadAnswer = collections.namedtuple(
    "SquadAnswer", ["text", "char_start", "char_end", "score", "null_score"])
SquadAnswer.__doc__ = """Best answer of one example.

Fields:
    text: the answer, an exact substring of the passage ("" when predicted unanswerable).
    char_start, char_end: its character range in the passage (-1, -1 when empty).
    score: start + end log-probability of the best span (-inf when no valid span).
    null_score: the smallest `cls_logits` over the example's windows (higher = less answerable).
"""


def squad_best_answer(context, window_features, window_outputs, max_answer_length=64,
                      null_score_threshold=None):
    """Picks the best span over every window of one example and cuts it from the passage.

    Follows the original `run_squad.py` post-processing: each window proposes the
    `K1 x K2` (start, end) pairs of its beam; a pair is kept when both ends are
    passage pieces, the start piece has its maximum context in this window,
    end >= start, and the span is at most `max_answer_length` pieces; its score
    is the sum of the two log-probabilities. The null score is the minimum
    `cls_logits` over windows. The text is the passage's characters from the
    start piece's first byte to the end piece's last byte, with surrounding
    whitespace dropped (SentencePiece's `▁` pieces cover the preceding space).

    Args:
        context (str): the passage, `str` (the one given to `XLNetSquadPreprocessor`).
        window_features: dict of numpy arrays from `XLNetSquadPreprocessor` for this
            example: `piece_start_bytes`, `piece_end_bytes`, `token_is_max_context`, each `[W, L]`.
        window_outputs: dict of numpy arrays, the `XLNetSpanLabeler` inference outputs
            for the same windows: `start_top_log_probs` `[W, K1]`, `start_top_index`
            `[W, K1]`, `end_top_log_probs` `[W, K1, K2]` (or flattened `[W, K1*K2]`),
            `end_top_index` (same shape), `cls_logits` `[W]`.
        max_answer_length: longest answer in pieces (original: 64).
        null_score_threshold (float | None): None (SQuAD 1.1: always answer) or a float: answer ""
            when `null_score > null_score_threshold` (SQuAD 2.0).

    Returns:
        A `SquadAnswer`.
    """
    if isinstance(context, bytes):
        context_bytes = context
        context = context.decode("utf-8")
    else:
        context_bytes = context.encode("utf-8")
    starts_b = np.asarray(window_features["piece_start_bytes"])
    ends_b = np.asarray(window_features["piece_end_bytes"])
    max_context = np.asarray(window_features["token_is_max_context"])
    start_lp = np.asarray(window_outputs["start_top_log_probs"])
    start_ix = np.asarray(window_outputs["start_top_index"])
    num_windows, k1 = start_lp.shape
    if num_windows == 0:  # Nothing to answer from: no span, and a null score no threshold accepts.
        return SquadAnswer("", -1, -1, -np.inf, np.inf)
    end_lp = np.asarray(window_outputs["end_top_log_probs"]).reshape(num_windows, k1, -1)
    end_ix = np.asarray(window_outputs["end_top_index"]).reshape(num_windows, k1, -1)
    cls_logits = np.asarray(window_outputs["cls_logits"]).reshape(num_windows)
    if starts_b.shape[0] != num_windows:
        raise ValueError(f"squad_best_answer: {starts_b.shape[0]} windows of features but "
                         f"{num_windows} windows of outputs.")

    best = (-np.inf, -1, -1)
    for w in range(num_windows):
        for i in range(k1):
            s = int(start_ix[w, i])
            if starts_b[w, s] < 0 or not max_context[w, s]:
                continue
            for j in range(end_ix.shape[2]):
                e = int(end_ix[w, i, j])
                if ends_b[w, e] < 0 or e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(start_lp[w, i] + end_lp[w, i, j])
                if score > best[0]:
                    best = (score, int(starts_b[w, s]), int(ends_b[w, e]))
    null_score = float(np.min(cls_logits))
    score, first_byte, last_byte = best
    answerable = null_score_threshold is None or null_score <= null_score_threshold
    if first_byte < 0 or not answerable:
        return SquadAnswer("", -1, -1, score, null_score)
    return _cut(context, context_bytes, first_byte, last_byte, score, null_score)


def _cut(context, context_bytes, first_byte, last_byte, score, null_score):
    # Byte offsets -> character offsets; a piece boundary inside a multi-byte
    # character (possible with byte fallback) is moved outward to whole characters.
    char_start = len(context_bytes[:first_byte].decode("utf-8", errors="ignore"))
    char_end = len(context_bytes[:last_byte].decode("utf-8", errors="ignore"))
    if len(context_bytes[:last_byte].decode("utf-8", errors="ignore").encode("utf-8")) < last_byte:
        char_end += 1
    text = context[char_start:char_end]
    stripped = text.strip()
    char_start += len(text) - len(text.lstrip())
    char_end = char_start + len(stripped)
    if not stripped:  # A span of whitespace is the empty answer: offsets -1 as documented.
        return SquadAnswer("", -1, -1, score, null_score)
    return SquadAnswer(stripped, char_start, char_end, score, null_score)


def squad_predictions(contexts, features, outputs, max_answer_length=64, null_score_threshold=None):
    """Best answers of many examples whose windows are mixed in one flat batch.

    Args:
        contexts: dict `example_id -> passage str`.
        features: dict of numpy arrays over all windows `[N, ...]`, including
            `example_id` (any hashable dtype) and the keys `squad_best_answer` reads.
        outputs: dict of numpy arrays of the span labeler over the same `N` windows.
        max_answer_length: as in `squad_best_answer`.
        null_score_threshold (float | None): as in `squad_best_answer`.

    Returns:
        dict `example_id -> SquadAnswer` (examples with no window are absent).
    """
    ids = np.asarray(features["example_id"])
    groups = collections.defaultdict(list)
    for row, example_id in enumerate(ids.tolist()):
        if isinstance(example_id, bytes):
            example_id = example_id.decode("utf-8")
        groups[example_id].append(row)
    answers = {}
    for example_id, rows in groups.items():
        if example_id not in contexts:
            raise KeyError(f"squad_predictions: no passage for example_id {example_id!r}.")
        rows = np.asarray(rows)
        answers[example_id] = squad_best_answer(
            contexts[example_id],
            {k: np.asarray(features[k])[rows] for k in
             ("piece_start_bytes", "piece_end_bytes", "token_is_max_context")},
            {k: np.asarray(v)[rows] for k, v in outputs.items()},
            max_answer_length=max_answer_length, null_score_threshold=null_score_threshold)
    return answers
