import numpy as np
import pytest

from xlnet_tf.finetuning.evaluation import check_collapse, classification_metrics


def test_collapse_warning_fires_only_when_labels_vary():
    with pytest.warns(RuntimeWarning, match="collapsed to one class"):
        assert check_collapse([0, 1, 1, 0], [1, 1, 1, 1])
    assert not check_collapse([1, 1, 1], [1, 1, 1])  # a one-class eval set is not a collapse
    assert not check_collapse([0, 1, 1, 0], [0, 1, 1, 1])


def test_named_metrics_match_the_metric_functions():
    labels = np.array([1, 1, 0, 0, 1, 0])
    predictions = np.array([1, 0, 0, 1, 1, 0])
    result = classification_metrics(["accuracy", "f1", "matthews", "macro_f1"], labels, predictions)
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["matthews"] == pytest.approx(1 / 3)  # (2*2 - 1*1) / sqrt(3*3*3*3)
    assert result["macro_f1"] == pytest.approx(2 / 3)
    scores = classification_metrics(["pearson_spearman"], [1.0, 2.0, 3.0], None, scores=[2.0, 4.0, 6.0])
    assert scores["pearson"] == pytest.approx(1.0) and scores["spearman"] == pytest.approx(1.0)
