"""`XLNetSpanLabelerPreprocessor`: SQuAD questions and contexts -> one packed window per example."""

import keras
from xlnet_tf.tensorflow_required import tensorflow as tf
from xlnet_tf.preprocessing.preprocessing_function import preprocessing_function

from xlnet_tf.preprocessing.batch_size_check import same_batch_size
from xlnet_tf.preprocessing.xlnet_preprocessor import XLNetPreprocessor, is_packed
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor

WINDOW_KEYS = ("token_ids", "segment_ids", "padding_mask", "answer_mask")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetSpanLabelerPreprocessor(XLNetPreprocessor):
    """Packs (context, question) as `P <sep> Q <sep> <cls>` for `XLNetSpanLabeler`.

    One window per example: the first `XLNetSquadPreprocessor` window (the
    passage's first `sequence_length - 3 - len(question)` pieces). That is what
    `fit`, `evaluate` and `predict` see; an answer beyond that window trains
    as "no answer" (start = end = `<cls>`). Long passages need every window
    and the text answer decoding of `xlnet_tf.preprocessing.squad_postprocessing`:
    `xlnet-tf finetune --task squad`, the exported SavedModel and `xlnet-tf predict`
    do that.

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: window length L.
        max_query_length: question pieces kept (original: 64).
        doc_stride: kept for presets (window step of the multi-window readers).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a dict `{"context": [B] str, "question": [B] str}`, or a packed dict.
        y: optional dict `{"answer_start": [B] int (character offset in context),
            "answer_text": [B] str}` and optionally `"is_impossible"` `[B]` (inputs of
            different batch sizes are an error naming them).
        sample_weight: optional `[B]`.

    Returns:
        `x`: int32 `token_ids`, `segment_ids`, `padding_mask`, `answer_mask` `[B, L]`
        (plus `start_positions` `[B]` when `y` is given, which selects the
        model's training outputs); `y`: `{"start_logits": [B], "end_logits": [B],
        "cls_logits": [B] float (1 = no answer)}`.

    Example:
    >>> from xlnet_tf import XLNetSpanLabelerPreprocessor, XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> preprocessor = XLNetSpanLabelerPreprocessor(tokenizer, sequence_length=64)
    >>> x, y = preprocessor({"context": ["The fox jumps."], "question": ["Who jumps?"]},
    ...                     {"answer_start": [4], "answer_text": ["fox"]})
    """

    def __init__(self, tokenizer, sequence_length=512, max_query_length=64, doc_stride=128, **kwargs):
        kwargs.pop("truncate", None)
        kwargs.pop("second_max_length", None)
        super().__init__(tokenizer, sequence_length=sequence_length, **kwargs)
        self.max_query_length = int(max_query_length)
        self.doc_stride = int(doc_stride)
        self._squad = None

    @classmethod
    def preset_settings(cls, info):
        settings = super().preset_settings(info)
        for key in ("max_query_length", "doc_stride"):
            if info.get(key):
                settings[key] = int(info[key])
        return settings

    def squad(self):
        """The window maker, built on first use (the vocabulary may load after construction)."""
        if self._squad is None:
            # Eagerly, also when first called inside a tf.data map: its SentencePiece
            # resource must outlive that trace.
            with tf.init_scope():
                self._squad = self._make_squad()
        return self._squad

    def _make_squad(self):
        return XLNetSquadPreprocessor(
                self.tokenizer, sequence_length=self.sequence_length,
                max_query_length=min(self.max_query_length, self.sequence_length - 4),
                doc_stride=self.doc_stride)

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if is_packed(x):
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        if not isinstance(x, dict) or not {"context", "question"} <= set(x):
            raise ValueError("XLNetSpanLabelerPreprocessor takes x = {'context': ..., 'question': ...}; "
                             f"got {sorted(x) if isinstance(x, dict) else type(x).__name__}.")
        if y is not None and (not isinstance(y, dict) or not {"answer_start", "answer_text"} <= set(y)):
            raise ValueError("XLNetSpanLabelerPreprocessor takes y = {'answer_start': ..., "
                             f"'answer_text': ...}}; got {sorted(y) if isinstance(y, dict) else type(y).__name__}.")
        squad = self.squad()
        owner = type(self).__name__
        # `tf.map_fn` walks the rows of its inputs together: each must have one per example.
        inputs = same_batch_size(owner, {
            "context": tf.reshape(tf.convert_to_tensor(x["context"], tf.string), [-1]),  # [B]
            "question": tf.reshape(tf.convert_to_tensor(x["question"], tf.string), [-1])})
        contexts, questions = inputs["context"], inputs["question"]
        length = self.sequence_length
        spec = {k: tf.TensorSpec([length], tf.int32) for k in WINDOW_KEYS}
        if y is None:
            def first_window(example):
                windows = squad(example[0], example[1])
                return {k: windows[k][0] for k in WINDOW_KEYS}

            x = tf.map_fn(first_window, (contexts, questions), fn_output_signature=spec)
            return keras.utils.pack_x_y_sample_weight(x, None, sample_weight)

        labels = {
            "context": contexts,
            "answer_start": tf.reshape(tf.cast(y["answer_start"], tf.int32), [-1]),
            "answer_text": tf.reshape(tf.convert_to_tensor(y["answer_text"], tf.string), [-1])}
        if y.get("is_impossible") is not None:
            labels["is_impossible"] = tf.reshape(tf.cast(y["is_impossible"], tf.int32), [-1])
        labels = same_batch_size(owner, labels)
        starts, texts = labels["answer_start"], labels["answer_text"]
        impossible = labels.get("is_impossible", tf.zeros_like(starts))
        label_keys = ("start_positions", "end_positions", "is_impossible")
        spec.update({k: tf.TensorSpec([], tf.int32) for k in label_keys})

        def first_labeled_window(example):
            windows = squad(example[0], example[1], answer_start=example[2], answer_text=example[3],
                            is_impossible=example[4])
            return {k: windows[k][0] for k in WINDOW_KEYS + label_keys}

        windows = tf.map_fn(first_labeled_window, (contexts, questions, starts, texts, impossible),
                            fn_output_signature=spec)
        x = {k: windows[k] for k in WINDOW_KEYS}
        x["start_positions"] = windows["start_positions"]
        y = {"start_logits": windows["start_positions"], "end_logits": windows["end_positions"],
             "cls_logits": tf.cast(windows["is_impossible"], tf.float32)}
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update({"max_query_length": self.max_query_length, "doc_stride": self.doc_stride})
        return config
