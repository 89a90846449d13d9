"""`XLNetMultipleChoice`: RACE-style multiple choice on an XLNet backbone."""

import keras
from keras import ops

from xlnet_tf import tasks
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.segment_recurrence import (last_segment_output, static_rank,
                                                 with_segment_axis)
from xlnet_tf.models.xlnet_task import CLS_TOKEN_ID, XLNetTask, cls_positions
from xlnet_tf.preprocessing.xlnet_multiple_choice_preprocessor import XLNetMultipleChoicePreprocessor


@keras.saving.register_keras_serializable(package="xlnet_tf")
@tasks.register_task_model(tasks.MULTIPLE_CHOICE)
class XLNetMultipleChoice(XLNetTask):
    """Scores each (context, question + option) pair and returns one logit per choice.

    Every choice is packed as its own sequence (`context <sep> question option
    <sep> <cls>`); all choices of a batch run through the backbone as one
    `[B * C, L]` batch, the `<cls>` summary (projection + tanh + dropout, as in
    the original RACE code) gives one score each, and the scores are reshaped
    to `[B, C]` for a softmax over choices.

    Passages longer than one window: features `[B, C, S, L]` hold each choice's
    sequence packed at length S * L and cut into S consecutive segments; every
    choice is read segment by segment with the backbone's recurrence memory
    (`segment_recurrence.last_segment_output`, `memory_length` / `reuse_length`
    of its config) and scored on the `<cls>` of its last segment. Leading
    padding segments change nothing; S = 1 is exactly the `[B, C, L]` path.

    Args:
        backbone: an `XLNetBackbone`.
        dropout: dropout rate of the summary.
        cls_token_id: id of `<cls>`.
        **kwargs: `name`, `dtype`, `trainable`.

    Call arguments:
        inputs: dict with `token_ids`, `segment_ids`, `padding_mask`, each int32 `[B, C, L]`
            (C = number of choices, static), or each `[B, C, S, L]` for long passages.
        training: bool, enables dropout.

    Returns:
        float32 logits `[B, C]`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig, XLNetMultipleChoice
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=32, num_layers=2, num_heads=2,
    ...                                      head_dim=4, hidden_dim=8, intermediate_dim=16))
    >>> model = XLNetMultipleChoice(backbone)
    >>> ids = np.full((2, 4, 16), 11)  # [B, choices, L]
    >>> model({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}).shape
    TensorShape([2, 4])
    """

    preprocessor_cls = XLNetMultipleChoicePreprocessor
    input_shapes = (("batch", "choices", "length"), ("batch", "choices", "segments", "length"))
    text_inputs = ('a dict {"context": strings [batch], "question": strings [batch], '
                   '"choices": strings [batch, choices]}')

    def __init__(self, backbone, dropout=0.1, cls_token_id=CLS_TOKEN_ID, **kwargs):
        super().__init__(backbone, **kwargs)
        self.dropout = float(dropout)
        self.cls_token_id = int(cls_token_id)
        initializer = keras.initializers.TruncatedNormal(stddev=backbone.config.initializer_range)
        self.summary_projection = keras.layers.Dense(
            backbone.config.hidden_dim, activation="tanh", kernel_initializer=initializer,
            dtype=self.dtype_policy, name="summary_projection")
        self.summary_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                    name="summary_dropout")
        self.score_dense = keras.layers.Dense(1, kernel_initializer=initializer,
                                              dtype=self.dtype_policy, name="score")
        self.build()

    @classmethod
    def default_compile_arguments(cls, **unused):
        """Cross-entropy over the choices and accuracy."""
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def build_head(self, hidden_dim):
        self.summary_projection.build((None, hidden_dim))
        self.score_dense.build((None, hidden_dim))

    def call(self, inputs, training=None):
        features = {k: ops.convert_to_tensor(v) for k, v in self.backbone_inputs(inputs).items()}
        if static_rank(features["token_ids"]) is None:  # predict() relaxed its trace: read segments
            features = {k: with_segment_axis(v, 3) for k, v in features.items()}  # [B, C, S, L]
        token_ids = features["token_ids"]
        rank = len(token_ids.shape)
        if rank not in (3, 4):
            raise ValueError("XLNetMultipleChoice expects token_ids of shape [batch, choices, "
                             "length] or, for long passages, [batch, choices, segments, length]; "
                             f"got {tuple(token_ids.shape)}.")
        num_choices = token_ids.shape[1]
        length = ops.shape(token_ids)[-1]
        if rank == 4 and token_ids.shape[2] == 1:
            rank = 3  # one segment is one window
        # One step seed (None outside fit): backbone and head masks survive a resume.
        step_seed = seeded_dropout.training_dropout_seed(self, training)
        backbone_seed = seeded_dropout.sub_seed(step_seed, seeded_dropout.BACKBONE_SEED)
        # The head reads <cls> only, so the backbone's last layer runs at that position alone.
        if rank == 3:
            flat = {k: ops.reshape(v, (-1, length)) for k, v in features.items()}  # [B*C, L]
            index = cls_positions(flat["token_ids"], flat["padding_mask"], self.cls_token_id)[:, None]  # [B*C, 1]
            sequence = self.backbone(flat, training=training, dropout_seed=backbone_seed,
                                     output_positions=index)["sequence_output"]  # [B*C, 1, H]
        else:
            num_segments = token_ids.shape[2] or ops.shape(token_ids)[2]
            segments = {k: ops.reshape(v, (-1, num_segments, length))  # [B*C, S, L]
                        for k, v in features.items()}
            last = {k: v[:, -1] for k, v in segments.items()}  # [B*C, L], the last segment
            index = cls_positions(last["token_ids"], last["padding_mask"], self.cls_token_id)[:, None]  # [B*C, 1]
            sequence = last_segment_output(self.backbone, segments, training, backbone_seed,
                                           index)  # [B*C, 1, H]
        summary = sequence[:, 0]  # [B*C, H]
        summary = seeded_dropout.apply_dropout(
            self.summary_dropout, self.summary_projection(summary), training,
            seeded_dropout.sub_seed(step_seed, seeded_dropout.HEAD_SEED))
        scores = self.score_dense(summary)  # [B*C, 1]
        return ops.cast(ops.reshape(scores, (-1, num_choices)), "float32")  # [B, C]

    def dummy_inputs(self, batch_size=1, sequence_length=4):
        single = super().dummy_inputs(batch_size * 2, sequence_length)
        return {k: ops.reshape(v, (batch_size, 2, sequence_length)) for k, v in single.items()}

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "cls_token_id": self.cls_token_id})
        return config
