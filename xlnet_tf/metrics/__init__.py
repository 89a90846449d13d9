"""Evaluation metrics of the fine-tuning tasks (numpy; computed on whole evaluation sets)."""

from xlnet_tf.metrics.classification_metrics import accuracy, f1_score, matthews_corrcoef, pearson_spearman
from xlnet_tf.metrics.squad_metrics import exact_match_score, f1_score_squad, normalize_answer, squad_scores
