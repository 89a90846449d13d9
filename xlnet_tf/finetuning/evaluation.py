"""Scores a task model on its evaluation set with the task's standard metrics."""

import logging
import warnings
import weakref

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.data import finetuning as data
from xlnet_tf.formats.finetuning_records import IGNORE_LABEL
from xlnet_tf.metrics import classification_metrics as cls_metrics
from xlnet_tf.metrics.squad_metrics import squad_scores
from xlnet_tf.metrics.squad_metrics import squad_v2_best_thresholds
from xlnet_tf.tasks import task_type
from xlnet_tf.preprocessing.squad_postprocessing import squad_predictions

_log = logging.getLogger(__name__)
MODEL_KEYS = ("token_ids", "segment_ids", "padding_mask", "answer_mask")


_PREDICT_FNS = weakref.WeakKeyDictionary()


def _predict_fn(model):
    """`features (tf.data batch) -> numpy outputs` of `model` in inference mode, compiled once per model.

    The evaluation sets are tf.data on every backend. On TensorFlow the batch goes
    to one traced function; on JAX and PyTorch it is handed over as numpy arrays to
    Keras' own compiled predict step on the backend (`predict_on_batch`), under the
    distribution the run trains with (`_BackendPredict`).
    """
    if model not in _PREDICT_FNS:
        if keras.config.backend() == "tensorflow":
            # One traced function per model, reused by every evaluation of a run.
            traced = tf.function(lambda features: model(features, training=False), reduce_retracing=True)

            def predict(features):
                return tf.nest.map_structure(lambda t: t.numpy(), traced(features))
        else:
            predict = _BackendPredict(model)
        _PREDICT_FNS[model] = predict
    return _PREDICT_FNS[model]


class _BackendPredict:
    """`model.predict_on_batch` of tf.data batches, each batch padded to the rows of the first one.

    The shorter last batch of an evaluation set would otherwise compile the
    backend's predict step again for its shape, and may not split over the
    devices of a `keras.distribution`; its padding rows (copies of its last row)
    are dropped from the outputs.
    """

    def __init__(self, model):
        self.model, self.rows = model, None

    def __call__(self, features):
        arrays = tf.nest.map_structure(lambda t: np.asarray(t), features)
        rows = len(tf.nest.flatten(arrays)[0])
        self.rows = self.rows or rows
        pad = max(self.rows - rows, 0)
        if pad:
            arrays = tf.nest.map_structure(lambda a: np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]), arrays)
        outputs = self.model.predict_on_batch(arrays)
        return tf.nest.map_structure(lambda a: np.asarray(a)[:rows], outputs)


def classification_metrics(names, labels, predictions, scores=None):
    """Named metrics of class predictions (or regression scores for `pearson_spearman`)."""
    result = {}
    for name in names:
        if name == "accuracy":
            result["accuracy"] = cls_metrics.accuracy(labels, predictions)
        elif name == "f1":
            result["f1"] = cls_metrics.f1_score(labels, predictions)
        elif name == "macro_f1":
            result["macro_f1"] = cls_metrics.f1_score(labels, predictions, average="macro")
        elif name == "matthews":
            result["matthews"] = cls_metrics.matthews_corrcoef(labels, predictions)
        elif name == "pearson_spearman":
            result.update(cls_metrics.pearson_spearman(labels, predictions if scores is None else scores))
    return result


def check_collapse(labels, predictions, what="predictions"):
    """Warns (and returns True) when every prediction is the same class but the labels are not."""
    labels = np.asarray(labels).reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    if predictions.size and np.unique(predictions).size == 1 and np.unique(labels).size > 1:
        message = (f"All {predictions.size} {what} are class {predictions[0].item()!r} while the labels have "
                   f"{np.unique(labels).size} classes: the model has collapsed to one class (check the "
                   "learning rate, the number of steps and the label balance).")
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        _log.warning(message)
        return True
    return False


def evaluate(model, task, tokenizer, batch_size, data_dir=None, collapse_warning=True):
    """Runs `model` over the evaluation set of `task` and returns a flat dict of metrics.

    Args:
        model: a task model matching `task.task_type`.
        task: a resolved `TaskSpec`.
        tokenizer: the run's `XLNetTokenizer`.
        batch_size: evaluation batch size.
        data_dir: TFDS data directory.
        collapse_warning: warn when every prediction is the same class.

    Returns:
        dict of metric name -> float, plus `examples` (documents or questions
        scored; labelled tokens for token classification) and `truncated_examples`
        (documents, questions or sentences that packing cut to fit
        `task.max_segments * task.sequence_length` pieces; a multiple-choice
        question counts when any choice was cut; null for records written without
        the flag), except for span tasks, whose windows cover the whole passage;
        and `collapsed` for class tasks.
    """
    evaluation = TaskEvaluation(model, task, tokenizer, batch_size, data_dir=data_dir,
                                collapse_warning=collapse_warning)
    return task_type(task.task_type).evaluate(evaluation)


class TaskEvaluation:
    """One pass of a task model over its evaluation set; the task type picks how it is scored.

    `TaskType.evaluate` calls one of `classes` (argmax vs class ids), `scores`
    (one float vs a float target), `tags` (argmax per labelled position) or
    `squad` (answer texts vs the gold answers).

    Example:
    >>> # skip-example: runs a fine-tuned model over its evaluation set
    >>> from xlnet_tf.finetuning.evaluation import TaskEvaluation
    >>> from xlnet_tf.tasks import task_type
    >>> evaluation = TaskEvaluation(model, task, tokenizer, batch_size=32)
    >>> task_type(task.task_type).evaluate(evaluation)["accuracy"]
    0.875
    """

    def __init__(self, model, task, tokenizer, batch_size, data_dir=None, collapse_warning=True):
        self.predict = _predict_fn(model)
        self.task, self.tokenizer, self.batch_size = task, tokenizer, batch_size
        self.data_dir, self.collapse_warning = data_dir, collapse_warning

    def _batches(self):
        """Per-batch logits and labels of the evaluation set, and the count of truncated examples."""
        logits, labels, truncated = [], [], []
        for features, batch_labels, batch_truncated in data.finetuning_dataset(
                self.task, self.tokenizer, "eval", self.batch_size, training=False, data_dir=self.data_dir,
                with_truncation=True):
            logits.append(np.asarray(self.predict(features)))
            labels.append(np.asarray(batch_labels))
            truncated.append(np.asarray(batch_truncated).reshape(-1))
        if not logits:
            raise ValueError("The evaluation set is empty.")
        truncated = np.concatenate(truncated)
        # -1: records that do not carry the flag (token classification); the count is then unknown (null).
        return logits, labels, None if (truncated < 0).any() else int(truncated.sum())

    def classes(self):
        """Class metrics of one prediction per example."""
        logits, labels, truncated_examples = self._batches()
        return self._class_metrics(np.concatenate(logits), np.concatenate(labels).reshape(-1), truncated_examples)

    def tags(self):
        """Class metrics of one prediction per labelled position (ignored positions left out)."""
        logits, labels, truncated_examples = self._batches()
        logits = np.concatenate([x.reshape(-1, x.shape[-1]) for x in logits])
        labels = np.concatenate([y.reshape(-1) for y in labels])
        keep = labels != IGNORE_LABEL
        return self._class_metrics(logits[keep], labels[keep], truncated_examples)

    def _class_metrics(self, logits, labels, truncated_examples):
        result = {"examples": int(labels.shape[0]), "truncated_examples": truncated_examples}
        predictions = logits.argmax(-1)
        result.update(classification_metrics(self.task.metrics, labels, predictions))
        result["collapsed"] = check_collapse(labels, predictions) if self.collapse_warning else False
        return result

    def scores(self):
        """Regression metrics of one float per example, with the mean squared error."""
        logits, labels, truncated_examples = self._batches()
        scores = np.concatenate(logits).reshape(-1)
        labels = np.concatenate(labels).reshape(-1)
        result = {"examples": int(labels.shape[0]), "truncated_examples": truncated_examples}
        result.update(classification_metrics(self.task.metrics, labels, scores))
        result["mse"] = float(np.mean((scores - labels) ** 2))
        result["collapsed"] = bool(np.std(scores) < 1e-6 < np.std(labels))
        if self.collapse_warning and result["collapsed"]:
            warnings.warn("All regression predictions are the same value: the model has collapsed.",
                          RuntimeWarning, stacklevel=2)
        return result

    def squad(self):
        """SQuAD EM / F1 of the answer texts; SQuAD 2.0 adds the null-score threshold search."""
        task = self.task
        contexts, golds = data.squad_eval_references(task, data_dir=self.data_dir)
        features, outputs = {}, {}
        for batch in data.squad_eval_dataset(task, self.tokenizer, self.batch_size, data_dir=self.data_dir):
            out = self.predict({k: batch[k] for k in MODEL_KEYS})
            for key, value in batch.items():
                features.setdefault(key, []).append(value.numpy())
            for key, value in out.items():
                outputs.setdefault(key, []).append(np.asarray(value))
        features = {k: np.concatenate(v) for k, v in features.items()}
        outputs = {k: np.concatenate(v) for k, v in outputs.items()}
        # Best non-null spans and null scores; the threshold is applied below, so the
        # SQuAD 2.0 search sees every question's span.
        answers = squad_predictions(contexts, features, outputs, max_answer_length=task.max_answer_length,
                                    null_score_threshold=None)
        threshold = task.null_score_threshold
        texts = {q: a.text if threshold is None or a.null_score <= threshold else "" for q, a in answers.items()}
        result = squad_scores(texts, golds)
        result["examples"] = result.pop("total")
        if task.version_2:
            # Questions with no window (none in practice) count as unanswered: +inf null score.
            null_scores = {q: answers[q].null_score if q in answers else float("inf") for q in golds}
            result.update(squad_v2_best_thresholds({q: a.text for q, a in answers.items()}, null_scores, golds))
        return result
