"""`XLNetClassifier`: sequence classification and regression on an XLNet backbone."""

import keras
from keras import ops

from xlnet_tf import tasks
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.segment_recurrence import (last_segment_output, static_rank,
                                                 with_segment_axis)
from xlnet_tf.models.xlnet_task import CLS_TOKEN_ID, XLNetTask, cls_positions
from xlnet_tf.preprocessing.xlnet_classifier_preprocessor import XLNetClassifierPreprocessor


@keras.saving.register_keras_serializable(package="xlnet_tf")
@tasks.register_task_model(tasks.CLASSIFICATION, tasks.REGRESSION)
class XLNetClassifier(XLNetTask):
    """Classification (or regression, `num_classes=1`) head on the `<cls>` token.

    The head follows the original fine-tuning code (`summary_type="last"`,
    `use_summ_proj=True`): the content-stream output at the `<cls>` position is
    projected by a `hidden_dim` dense layer with tanh, passed through dropout,
    then through a dense layer to `num_classes` logits.

    The `<cls>` position is found from the tokens, not assumed: the last real
    `<cls>` of each row (see `xlnet_tf.models.xlnet_task.cls_positions`), so
    left padding (the XLNet convention, `<cls>` at `L - 1`) and right padding
    give the same prediction.

    Long documents: features of rank 3, `[B, S, L]`, are S consecutive segments
    of one document packed at length S * L (`segment_recurrence.split_into_segments`);
    the backbone reads them in order with its recurrence memory
    (`memory_length`, `reuse_length` of its config; set them when building the
    backbone, fine-tuning presets turn memory off) and the head reads the
    `<cls>` of the last segment (`segment_recurrence.last_segment_output`).
    Leading padding segments change nothing, and S = 1 is exactly the rank-2 path.

    Args:
        backbone: an `XLNetBackbone`.
        num_classes: number of classes; 1 gives a single regression output.
        dropout: dropout rate of the summary (the original fine-tuning used 0.1).
        cls_token_id: id of `<cls>` in the vocabulary (3 for the released one).
        **kwargs: `preprocessor`: an `XLNetClassifierPreprocessor` (raw text in `fit`/`predict`), or None;
            `compile`: compile with the defaults (AdamW with warmup, cross-entropy + accuracy,
            or mean squared error for regression); `name`, `dtype`, `trainable`.

    Call arguments:
        inputs: dict with `token_ids` int32 `[B, L]`, `segment_ids` int32 `[B, L]`,
            `padding_mask` int32/bool `[B, L]` (1 = real token), or all three
            `[B, S, L]` for a long document (S static in `fit`). Other keys are ignored.
        training: bool, enables dropout.

    Returns:
        float32 logits `[B, num_classes]` (for regression, `[B, 1]` predictions).

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetClassifier, XLNetConfig
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2,
    ...     head_dim=4, hidden_dim=8, intermediate_dim=16, memory_length=6))  # memory: long documents
    >>> model = XLNetClassifier(backbone, num_classes=3)
    >>> window = {"token_ids": np.array([[5, 5, 11, 12, 4, 3]]),
    ...           "segment_ids": np.array([[4, 4, 0, 0, 0, 2]]),
    ...           "padding_mask": np.array([[0, 0, 1, 1, 1, 1]])}
    >>> tuple(model(window).shape)
    (1, 3)
    >>> padding = {"token_ids": 5, "segment_ids": 4, "padding_mask": 0}
    >>> long = {k: np.stack([np.full_like(v, padding[k]), v], axis=1)  # [B=1, S=2, L=6]
    ...         for k, v in window.items()}
    >>> tuple(model(long).shape)
    (1, 3)
    """

    preprocessor_cls = XLNetClassifierPreprocessor
    input_shapes = (("batch", "length"), ("batch", "segments", "length"))
    text_inputs = "strings [batch], or a tuple (first texts, second texts) of two such lists"

    def __init__(self, backbone, num_classes=2, dropout=0.1, cls_token_id=CLS_TOKEN_ID, **kwargs):
        super().__init__(backbone, **kwargs)
        if int(num_classes) < 1:
            raise ValueError(f"XLNetClassifier.num_classes must be >= 1, got {num_classes}.")
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.cls_token_id = int(cls_token_id)
        hidden_dim = backbone.config.hidden_dim
        initializer = keras.initializers.TruncatedNormal(stddev=backbone.config.initializer_range)
        self.summary_projection = keras.layers.Dense(
            hidden_dim, activation="tanh", kernel_initializer=initializer,
            dtype=self.dtype_policy, name="summary_projection")
        self.summary_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                    name="summary_dropout")
        self.logits_dense = keras.layers.Dense(
            self.num_classes, kernel_initializer=initializer, dtype=self.dtype_policy,
            name="logits")
        self.build()

    @classmethod
    def default_compile_arguments(cls, num_classes=2, **unused):
        """Cross-entropy and accuracy on the logits; mean squared error for regression (`num_classes=1`)."""
        if int(num_classes) == 1:
            return {"loss": keras.losses.MeanSquaredError(),
                    "metrics": [keras.metrics.MeanAbsoluteError()]}
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def _compile_settings(self):
        return {"num_classes": self.num_classes}

    def build_head(self, hidden_dim):
        self.summary_projection.build((None, hidden_dim))
        self.logits_dense.build((None, hidden_dim))

    def call(self, inputs, training=None):
        features = {k: ops.convert_to_tensor(v) for k, v in self.backbone_inputs(inputs).items()}
        rank = static_rank(features["token_ids"])
        if rank is None:  # predict() relaxed its trace after windows and segments: read segments
            features = {k: with_segment_axis(v, 2) for k, v in features.items()}  # [B, S, L]
            rank = 3
        if rank == 3 and features["token_ids"].shape[1] == 1:
            features = {k: v[:, 0] for k, v in features.items()}  # [B, L]: one segment is one window
            rank = 2
        if rank not in (2, 3):
            raise ValueError("XLNetClassifier expects token_ids of shape [batch, length] or, for a "
                             "long document, [batch, segments, length]; got shape "
                             f"{tuple(features['token_ids'].shape)}.")
        window = features if rank == 2 else {k: v[:, -1] for k, v in features.items()}  # [B, L]
        # The head reads <cls> only, so the backbone's last layer runs at that position alone.
        index = cls_positions(window["token_ids"], window["padding_mask"], self.cls_token_id)[:, None]  # [B, 1]
        if rank == 2:
            sequence, head_seed = self.backbone_sequence(features, training, index)  # [B, 1, H]
        else:
            step_seed = seeded_dropout.training_dropout_seed(self, training)
            sequence = last_segment_output(
                self.backbone, features, training,
                seeded_dropout.sub_seed(step_seed, seeded_dropout.BACKBONE_SEED), index)  # [B, 1, H]
            head_seed = seeded_dropout.sub_seed(step_seed, seeded_dropout.HEAD_SEED)
        summary = sequence[:, 0]  # [B, H]
        summary = self.summary_projection(summary)
        summary = seeded_dropout.apply_dropout(self.summary_dropout, summary, training, head_seed)
        return ops.cast(self.logits_dense(summary), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout,
                       "cls_token_id": self.cls_token_id})
        return config
