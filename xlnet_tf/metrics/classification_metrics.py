"""Classification and regression metrics over a whole evaluation set (numpy).

GLUE's conventions: accuracy everywhere, binary F1 of the positive class (MRPC,
QQP), Matthews correlation (CoLA), Pearson and Spearman correlations (STS-B).
"""

import numpy as np


def _labels(y_true, y_pred):
    y_true = np.asarray(y_true).reshape(-1)
    y_pred = np.asarray(y_pred).reshape(-1)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"labels and predictions differ in size: {y_true.shape} vs {y_pred.shape}.")
    if y_true.size == 0:
        raise ValueError("cannot compute a metric on an empty evaluation set.")
    return y_true, y_pred


def accuracy(y_true, y_pred):
    """Fraction of predictions equal to the labels."""
    y_true, y_pred = _labels(y_true, y_pred)
    return float(np.mean(y_true == y_pred))


def f1_score(y_true, y_pred, positive=1, average="binary"):
    """F1 of the positive class (`average="binary"`) or the unweighted mean over classes (`"macro"`).

    A class that is never predicted nor present has F1 0 in the binary case (as sklearn).
    """
    y_true, y_pred = _labels(y_true, y_pred)

    def one(c):
        tp = np.sum((y_pred == c) & (y_true == c))
        fp = np.sum((y_pred == c) & (y_true != c))
        fn = np.sum((y_pred != c) & (y_true == c))
        return 0.0 if tp == 0 else float(2 * tp / (2 * tp + fp + fn))

    if average == "binary":
        return one(positive)
    if average == "macro":
        classes = np.union1d(np.unique(y_true), np.unique(y_pred))
        return float(np.mean([one(c) for c in classes]))
    raise ValueError(f"f1_score: average must be 'binary' or 'macro', got {average!r}.")


def matthews_corrcoef(y_true, y_pred):
    """Matthews correlation coefficient, multiclass form (Gorodkin's R_K); 0 when undefined."""
    y_true, y_pred = _labels(y_true, y_pred)
    classes, encoded = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    t, p = encoded[: y_true.size], encoded[y_true.size:]
    k = classes.size
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (t, p), 1)
    n = confusion.sum()
    correct = np.trace(confusion)
    true_count = confusion.sum(axis=1)
    pred_count = confusion.sum(axis=0)
    cov_ytyp = correct * n - np.dot(true_count, pred_count)
    cov_ypyp = n * n - np.dot(pred_count, pred_count)
    cov_ytyt = n * n - np.dot(true_count, true_count)
    if cov_ypyp == 0 or cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def _rank(x):
    # Average ranks for ties, as Spearman's definition requires.
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size, dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _pearson(a, b):
    a = a - a.mean()
    b = b - b.mean()
    denominator = np.sqrt(np.sum(a * a) * np.sum(b * b))
    return 0.0 if denominator == 0 else float(np.sum(a * b) / denominator)


def pearson_spearman(y_true, y_pred):
    """Pearson and Spearman correlations (STS-B); returns a dict with both and their mean."""
    y_true, y_pred = _labels(y_true, y_pred)
    y_true = y_true.astype(np.float64)
    y_pred = y_pred.astype(np.float64)
    pearson = _pearson(y_true, y_pred)
    spearman = _pearson(_rank(y_true), _rank(y_pred))
    return {"pearson": pearson, "spearman": spearman, "pearson_spearman": (pearson + spearman) / 2}
