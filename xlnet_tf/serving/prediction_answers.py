"""`PredictionAnswers`: one example's row of a task SavedModel's outputs -> JSON-ready answer fields."""


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


class PredictionAnswers:
    """The answer builders of a prediction record; each task type picks its own (`TaskType.prediction_answer`).

    Each method takes `pick`, one example's row of the `serving_default` outputs (numpy values).

    Args:
        label_names: class names, in id order, for `top_k`.
        top_k: classification: also list the k most probable labels (0: off).

    Example:
    >>> from xlnet_tf.serving.prediction_answers import PredictionAnswers
    >>> import numpy as np
    >>> PredictionAnswers().score({"score": np.float32(0.75)})
    {'score': 0.75}
    """

    def __init__(self, label_names=None, top_k=0):
        self.label_names = label_names
        self.top_k = top_k

    def classes(self, pick):
        """`label`, `label_name` (when the model has names), `probabilities` (and `top_k`)."""
        probabilities = pick["probabilities"].tolist()
        answer = {"label": int(pick["label"])}
        if "label_name" in pick:
            answer["label_name"] = _to_python(pick["label_name"])
        answer["probabilities"] = probabilities
        if self.top_k > 0:
            order = sorted(range(len(probabilities)), key=lambda k: -probabilities[k])[:self.top_k]
            answer["top_k"] = [
                {"label": k, **({"label_name": self.label_names[k]} if self.label_names else {}),
                 "probability": probabilities[k]}
                for k in order
            ]
        return answer

    def score(self, pick):
        """`score`."""
        return {"score": float(pick["score"])}

    def tags(self, pick):
        """`pieces`, `labels` (and `label_names`) without the padding positions."""
        keep = [i for i, piece in enumerate(pick["pieces"].tolist()) if piece]
        answer = {"pieces": [_to_python(pick["pieces"][i]) for i in keep],
                  "labels": [int(pick["labels"][i]) for i in keep]}
        if "label_names" in pick:
            answer["label_names"] = [_to_python(pick["label_names"][i]) for i in keep]
        return answer

    def span(self, pick):
        """`answer`, `answer_start`, `answer_end`, `score` (None without a valid span), `null_score`."""
        return {
            "answer": _to_python(pick["answer_text"]),
            "answer_start": int(pick["answer_start"]),
            "answer_end": int(pick["answer_end"]),
            "score": _to_python(float(pick["score"])),
            "null_score": float(pick["null_score"]),
        }
