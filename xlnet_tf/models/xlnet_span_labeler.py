"""`XLNetSpanLabeler`: extractive question answering (SQuAD 1.1 / 2.0) on an XLNet backbone."""

import keras
from keras import ops

from xlnet_tf.formats.special_tokens import SEP_TOKEN_ID
from xlnet_tf import tasks
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.xlnet_task import CLS_TOKEN_ID, XLNetTask, cls_positions, gather_positions
from xlnet_tf.preprocessing.xlnet_span_labeler_preprocessor import XLNetSpanLabelerPreprocessor

PASSAGE_SEGMENT_ID = 0
# Masked logits are computed in float32, so a large finite constant is safe.
_MASKED_LOGIT = -1e30


@keras.saving.register_keras_serializable(package="xlnet_tf")
@tasks.register_task_model(tasks.SPAN)
class XLNetSpanLabeler(XLNetTask):
    """Start/end span heads and an answerability head, as in the original XLNet SQuAD model.

    - start logits: a dense layer on every content-stream output;
    - end logits, conditioned on a start position `s`: dense(`hidden_dim`, tanh) on
      `[h_i ; h_s]`, layer norm, dense(1). During training `s` is the gold start
      (`start_positions` in the inputs); at inference the `start_n_top` most
      likely starts are expanded and, for each, the `end_n_top` most likely ends
      are kept (the original beam of `run_squad.py`);
    - answer class (`cls_logits`, > 0 means "no answer"): dense(tanh) on
      `[sum_i p_start(i) h_i ; h_cls]`, dropout, dense(1) without bias.

    Positions outside `answer_mask` never win: their start/end logits are set
    to -1e30 before any softmax. `<cls>` stays allowed, because the original
    training points unanswerable windows at it.

    Args:
        backbone: an `XLNetBackbone`.
        start_n_top: starts kept by the inference beam (original: 5).
        end_n_top: ends kept per start (original: 5).
        dropout: dropout of the answer-class head.
        cls_token_id: id of `<cls>`.
        sep_token_id: id of `<sep>` (excluded from the derived answer mask).
        **kwargs: `name`, `dtype`, `trainable`.

    Call arguments:
        inputs: dict with
            - `token_ids`, `segment_ids`, `padding_mask`: int32 `[B, L]`, packed as
              `P <sep> Q <sep> <cls>` (see `xlnet_tf.preprocessing.squad`);
            - `answer_mask` (optional): int32 `[B, L]`, 1 where a span may start or
              end (passage pieces and `<cls>`). When absent it is derived: real
              tokens of segment 0 except `<sep>`, plus the `<cls>` position;
            - `start_positions` (optional): int32 `[B]`, the gold starts. Present ->
              training outputs; absent -> inference (beam) outputs.
        training: bool, enables dropout.

    Returns:
        With `start_positions`: dict of float32 `start_logits` `[B, L]`, `end_logits`
        `[B, L]` (masked), `cls_logits` `[B]`.
        Without: dict of `start_top_log_probs` float32 `[B, K1]`, `start_top_index`
        int32 `[B, K1]`, `end_top_log_probs` float32 `[B, K1, K2]`, `end_top_index`
        int32 `[B, K1, K2]` (the end candidates of the k-th start), `cls_logits` `[B]`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig, XLNetSpanLabeler
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=32, num_layers=2, num_heads=2,
    ...                                      head_dim=4, hidden_dim=8, intermediate_dim=16))
    >>> model = XLNetSpanLabeler(backbone)
    >>> # P <sep> Q <sep> <cls>, as XLNetSpanLabelerPreprocessor packs a context and a question.
    >>> features = {"token_ids": np.array([[11, 12, 13, 14, 4, 15, 16, 4, 3]]),
    ...             "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1, 1, 2]]),
    ...             "padding_mask": np.ones((1, 9), "int32")}
    >>> out = model(features)            # no start_positions: the inference beam
    >>> out["end_top_index"].shape       # [B, start_n_top, end_n_top]
    TensorShape([1, 5, 5])
    """

    preprocessor_cls = XLNetSpanLabelerPreprocessor
    text_inputs = 'a dict {"context": strings [batch], "question": strings [batch]}'

    def __init__(self, backbone, start_n_top=5, end_n_top=5, dropout=0.1,
                 cls_token_id=CLS_TOKEN_ID, sep_token_id=SEP_TOKEN_ID, **kwargs):
        super().__init__(backbone, **kwargs)
        if int(start_n_top) < 1 or int(end_n_top) < 1:
            raise ValueError(f"start_n_top and end_n_top must be >= 1, got {start_n_top}, {end_n_top}.")
        self.start_n_top = int(start_n_top)
        self.end_n_top = int(end_n_top)
        self.dropout = float(dropout)
        self.cls_token_id = int(cls_token_id)
        self.sep_token_id = int(sep_token_id)
        config = backbone.config
        initializer = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        dense = lambda units, name, **kw: keras.layers.Dense(  # noqa: E731
            units, kernel_initializer=initializer, dtype=self.dtype_policy, name=name, **kw)
        self.start_dense = dense(1, "start_logits")
        self.end_hidden = dense(config.hidden_dim, "end_hidden", activation="tanh")
        self.end_layer_norm = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_epsilon, dtype=self.dtype_policy, name="end_layer_norm")
        self.end_dense = dense(1, "end_logits")
        self.answer_hidden = dense(config.hidden_dim, "answer_class_hidden", activation="tanh")
        self.answer_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                   name="answer_class_dropout")
        self.answer_dense = dense(1, "answer_class_logits", use_bias=False)
        self.build()

    @classmethod
    def default_compile_arguments(cls, **unused):
        """The original objective: mean of the start and end cross-entropies + 0.5 x answerability.

        Training outputs (with `start_positions` in the inputs): labels are a dict
        of `start_logits` / `end_logits` (gold positions) and `cls_logits`
        (1 = no answer), as `XLNetSpanLabelerPreprocessor` produces.
        """
        def sparse():
            return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        return {"loss": {"start_logits": sparse(), "end_logits": sparse(),
                         "cls_logits": keras.losses.BinaryCrossentropy(from_logits=True)},
                "loss_weights": {"start_logits": 0.5, "end_logits": 0.5, "cls_logits": 0.5}}

    def build_head(self, hidden_dim):
        self.start_dense.build((None, None, hidden_dim))
        self.end_hidden.build((None, None, None, 2 * hidden_dim))  # [h_i ; h_start]
        self.end_layer_norm.build((None, None, None, hidden_dim))
        self.end_dense.build((None, None, None, hidden_dim))
        self.answer_hidden.build((None, 2 * hidden_dim))  # [start summary ; h_cls]
        self.answer_dense.build((None, hidden_dim))

    def _answer_mask(self, inputs, cls_index):
        if "answer_mask" in inputs:
            return ops.cast(inputs["answer_mask"], "bool")
        token_ids = inputs["token_ids"]
        real = ops.cast(inputs["padding_mask"], "bool")
        passage = ops.logical_and(ops.equal(inputs["segment_ids"], PASSAGE_SEGMENT_ID), real)
        passage = ops.logical_and(passage, ops.not_equal(token_ids, self.sep_token_id))
        is_cls = ops.cast(ops.one_hot(cls_index, ops.shape(token_ids)[1]), "bool")  # [B, L]
        return ops.logical_or(passage, is_cls)

    def _end_logits(self, sequence, start_states, mask):
        """End logits for every position given start states.

        sequence: [B, L, H]; start_states: [B, K, H]; mask: [B, L] -> [B, K, L].
        """
        k = ops.shape(start_states)[1]
        hidden = ops.repeat(ops.expand_dims(sequence, 1), k, axis=1)  # [B, K, L, H]
        starts = ops.broadcast_to(ops.expand_dims(start_states, 2), ops.shape(hidden))  # [B, K, L, H]
        x = self.end_hidden(ops.concatenate([hidden, starts], axis=-1))
        x = self.end_layer_norm(x)
        logits = ops.cast(ops.squeeze(self.end_dense(x), -1), "float32")  # [B, K, L]
        return ops.where(mask[:, None, :], logits, _MASKED_LOGIT)

    def call(self, inputs, training=None):
        features = self.backbone_inputs(inputs)
        sequence, head_seed = self.backbone_sequence(features, training)  # [B, L, H]
        cls_index = cls_positions(features["token_ids"], features["padding_mask"], self.cls_token_id)
        mask = self._answer_mask(inputs, cls_index)  # [B, L]

        start_logits = ops.cast(ops.squeeze(self.start_dense(sequence), -1), "float32")  # [B, L]
        start_logits = ops.where(mask, start_logits, _MASKED_LOGIT)

        # The answerability feature depends only on the start distribution, so a
        # window gets one `cls_logits` whatever span is chosen.
        start_probs = ops.cast(ops.softmax(start_logits, axis=-1), sequence.dtype)
        start_summary = ops.einsum("blh,bl->bh", sequence, start_probs)  # [B, H]
        cls_feature = gather_positions(sequence, cls_index)  # [B, H]
        answer = self.answer_hidden(ops.concatenate([start_summary, cls_feature], axis=-1))
        answer = seeded_dropout.apply_dropout(self.answer_dropout, answer, training, head_seed)
        cls_logits = ops.cast(ops.squeeze(self.answer_dense(answer), -1), "float32")  # [B]

        if "start_positions" in inputs:
            start_positions = ops.cast(ops.reshape(inputs["start_positions"], (-1,)), "int32")
            start_states = gather_positions(sequence, start_positions)[:, None, :]  # [B, 1, H]
            end_logits = self._end_logits(sequence, start_states, mask)[:, 0, :]  # [B, L]
            return {"start_logits": start_logits, "end_logits": end_logits,
                    "cls_logits": cls_logits}

        length = sequence.shape[1]
        k1 = self.start_n_top if length is None else min(self.start_n_top, length)
        k2 = self.end_n_top if length is None else min(self.end_n_top, length)
        start_log_probs = ops.log_softmax(start_logits, axis=-1)
        start_top_log_probs, start_top_index = ops.top_k(start_log_probs, k1)  # [B, K1]
        start_top_index = ops.cast(start_top_index, "int32")
        one_hot = ops.one_hot(start_top_index, ops.shape(sequence)[1], dtype=sequence.dtype)  # [B, K1, L]
        start_states = ops.einsum("blh,bkl->bkh", sequence, one_hot)  # [B, K1, H]
        end_logits = self._end_logits(sequence, start_states, mask)  # [B, K1, L]
        end_log_probs = ops.log_softmax(end_logits, axis=-1)
        end_top_log_probs, end_top_index = ops.top_k(end_log_probs, k2)  # [B, K1, K2]
        return {
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": end_top_log_probs,
            "end_top_index": ops.cast(end_top_index, "int32"),
            "cls_logits": cls_logits,
        }

    def get_config(self):
        config = super().get_config()
        config.update({"start_n_top": self.start_n_top, "end_n_top": self.end_n_top,
                       "dropout": self.dropout, "cls_token_id": self.cls_token_id,
                       "sep_token_id": self.sep_token_id})
        return config
