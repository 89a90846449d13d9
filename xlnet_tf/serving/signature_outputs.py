"""`SignatureOutputs`: a task model's raw outputs -> what a task SavedModel's signatures return."""

import tensorflow as tf

# The span labeler's beam: turning it into text needs the passage (`squad_best_answer`, or the
# strings-in signature's `SpanAnswerDecoder`).
SPAN_BEAM_KEYS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits")


def _pick(outputs, key):
    """Returns `outputs[key]` for dict outputs, the tensor itself otherwise."""
    if isinstance(outputs, dict):
        if key not in outputs:
            raise ValueError(
                f"The task model returned the keys {sorted(outputs)}; the serving module needs {key!r}."
            )
        return outputs[key]
    return outputs


class SignatureOutputs:
    """The output builders of a task SavedModel's signatures; each task type picks its own
    (`TaskType.decode_serving_outputs`).

    Args:
        output_key: which key of a dict-returning model holds the logits.
        label_names: optional class names, returned next to class indices.

    Example:

    ```python
    import tensorflow as tf
    from xlnet_tf.serving.signature_outputs import SignatureOutputs
    signature_outputs = SignatureOutputs("logits", ["neg", "pos"])
    signature_outputs.classes(tf.constant([[0.1, 2.0]]))["label_name"]  # [b"pos"]
    ```
    """

    def __init__(self, output_key="logits", label_names=None):
        self.output_key = output_key
        self._label_table = tf.constant(list(label_names), tf.string) if label_names else None

    def _logits(self, outputs):
        return tf.cast(_pick(outputs, self.output_key), tf.float32)

    def classes(self, outputs):
        """`logits`, `probabilities`, `label` (+ `label_name`) of one class per example (or per choice set)."""
        # Multiple choice: C is the number of choices, a softmax over them.
        logits = self._logits(outputs)  # [B, C]
        label = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [B]
        result = {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": label,
        }
        if self._label_table is not None:
            result["label_name"] = tf.gather(self._label_table, label)
        return result

    def score(self, outputs):
        """`score` `[B]`: one float per example."""
        return {"score": tf.reshape(self._logits(outputs), [-1])}  # [B]

    def tags(self, outputs, features):
        """`logits`, `probabilities`, `labels` (+ `label_names`) per position; -1 and "" on padding."""
        logits = self._logits(outputs)  # [B, L, C]
        labels = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [B, L]
        # Padding positions carry no prediction.
        labels = tf.where(features["padding_mask"] > 0, labels, -1)
        result = {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "labels": labels,
        }
        if self._label_table is not None:
            names = tf.gather(self._label_table, tf.maximum(labels, 0))  # [B, L]
            result["label_names"] = tf.where(labels >= 0, names, "")
        return result

    def span_beam(self, outputs):
        """The span labeler's top-k beam over token positions and its `cls_logits`."""
        return {key: _pick(outputs, key) for key in SPAN_BEAM_KEYS}
