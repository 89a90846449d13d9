"""`prediction_record`: one row of a task SavedModel's outputs as a JSON-ready dict."""

from xlnet_tf import tasks


def _to_python(value):
    """Numpy values and bytes -> JSON-ready Python values (NaN and infinities -> None)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "tolist"):
        return _to_python(value.tolist())
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return value


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
    >>> import numpy as np
    >>> prediction_record("regression", ("a fine film", None), {"score": np.array([0.75])}, 0)
    {'text': 'a fine film', 'score': 0.75}
    """
    entry = tasks.task_type(task)
    text, pair = row[0], row[-1]
    if entry.layout == tasks.WINDOWS:
        record = {"context": text, "question": pair}
    elif entry.layout == tasks.CHOICES:
        record = {"context": text, **({"question": row[1]} if len(row) == 3 else {}), "choices": pair}
    else:
        record = {"text": text}
        if pair is not None:
            record["text_pair"] = pair
    pick = {k: v[index] for k, v in outputs.items()}
    if entry.evaluation == tasks.CLASSES:
        probabilities = pick["probabilities"].tolist()
        record["label"] = int(pick["label"])
        if "label_name" in pick:
            record["label_name"] = _to_python(pick["label_name"])
        record["probabilities"] = probabilities
        if top_k > 0:
            order = sorted(range(len(probabilities)), key=lambda k: -probabilities[k])[:top_k]
            record["top_k"] = [
                {"label": k, **({"label_name": label_names[k]} if label_names else {}), "probability": probabilities[k]}
                for k in order
            ]
    elif entry.evaluation == tasks.SCORE:
        record["score"] = float(pick["score"])
    elif entry.evaluation == tasks.TAGS:
        keep = [i for i, piece in enumerate(pick["pieces"].tolist()) if piece]
        record["pieces"] = [_to_python(pick["pieces"][i]) for i in keep]
        record["labels"] = [int(pick["labels"][i]) for i in keep]
        if "label_names" in pick:
            record["label_names"] = [_to_python(pick["label_names"][i]) for i in keep]
    else:
        record["answer"] = _to_python(pick["answer_text"])
        record["answer_start"] = int(pick["answer_start"])
        record["answer_end"] = int(pick["answer_end"])
        record["score"] = _to_python(float(pick["score"]))
        record["null_score"] = float(pick["null_score"])
    return record
