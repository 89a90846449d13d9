import numpy as np
import pytest

from xlnet_tf.metrics import accuracy, f1_score, matthews_corrcoef, pearson_spearman


def test_accuracy_and_binary_f1_goldens():
    y = [1, 1, 0, 0, 1, 0]
    p = [1, 0, 0, 1, 1, 0]
    assert accuracy(y, p) == pytest.approx(4 / 6)
    # tp=2, fp=1, fn=1 -> F1 = 4 / 6
    assert f1_score(y, p) == pytest.approx(2 / 3)
    assert f1_score(y, [0] * 6) == 0.0
    assert f1_score([0, 1, 2, 2], [0, 2, 2, 2], average="macro") == pytest.approx((1 + 0 + 0.8) / 3)


def test_matthews_goldens():
    y = [1, 1, 0, 0, 1, 0]
    p = [1, 0, 0, 1, 1, 0]
    tp, tn, fp, fn = 2, 2, 1, 1
    expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert matthews_corrcoef(y, p) == pytest.approx(expected)
    assert matthews_corrcoef(y, [1] * 6) == 0.0  # collapsed predictions
    assert matthews_corrcoef([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)


def test_pearson_spearman_goldens():
    result = pearson_spearman([1, 2, 3, 4], [1, 3, 2, 4])
    # Spearman = 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 12 / 60
    assert result["spearman"] == pytest.approx(0.8)
    assert result["pearson"] == pytest.approx(0.8)
    ties = pearson_spearman([1, 2, 2, 3], [10, 20, 20, 40])
    assert ties["spearman"] == pytest.approx(1.0)
    assert ties["pearson"] < 1.0


def test_mismatched_or_empty_inputs_are_errors():
    with pytest.raises(ValueError, match="differ in size"):
        accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])
