"""`prediction_record`: one row of a task SavedModel's outputs as a JSON-ready dict."""

from xlnet_tf import tasks
from xlnet_tf.serving.prediction_answers import PredictionAnswers


def prediction_record(task, row, outputs, index, label_names=None, top_k=0):
    """The inputs of one example, echoed, with the model's answer for it.

    Args:
        task: "classification", "regression", "token_classification", "span" or
            "multiple_choice" (the `task_type` of the serving metadata).
        row: the example's inputs: `(text, text_pair or None)`, `(context, question)`
            for spans, `(context, [choices])` or `(context, question, [choices])` for multiple choice.
        outputs: the `serving_default` outputs of the batch holding the example,
            as numpy arrays.
        index: the example's row in the batch.
        label_names: class names, in id order, for `top_k`.
        top_k: classification: also list the k most probable labels (0: off).

    Returns:
        A dict: the inputs under their signature names, then per task `label`,
        `label_name`, `probabilities` (and `top_k`); `score`; `pieces`, `labels`
        (and `label_names`) without padding; or `answer`, `answer_start`,
        `answer_end`, `score`, `null_score`.

    Example:
    >>> from xlnet_tf.serving.prediction_record import prediction_record
    >>> import numpy as np
    >>> prediction_record("regression", ("a fine film", None), {"score": np.array([0.75])}, 0)
    {'text': 'a fine film', 'score': 0.75}
    """
    entry = tasks.task_type(task)
    pick = {k: v[index] for k, v in outputs.items()}
    return {**entry.prediction_inputs(row), **entry.prediction_answer(PredictionAnswers(label_names, top_k), pick)}
