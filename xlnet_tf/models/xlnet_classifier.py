"""`XLNetClassifier`: sequence classification and regression on an XLNet backbone."""

import keras
from keras import ops

from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.xlnet_task import CLS_TOKEN_ID, XLNetTask, cls_positions, gather_positions


@keras.saving.register_keras_serializable(package="xlnet_tf")
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

    Args:
        backbone: an `XLNetBackbone`.
        num_classes: number of classes; 1 gives a single regression output.
        preprocessor: an `XLNetClassifierPreprocessor` (raw text in `fit`/`predict`), or None.
        compile: compile with the defaults (AdamW with warmup, cross-entropy + accuracy,
            or mean squared error for regression).
        dropout: dropout rate of the summary (the original fine-tuning used 0.1).
        cls_token_id: id of `<cls>` in the vocabulary (3 for the released one).
        **kwargs: `name`, `dtype`, `trainable`.

    Call arguments:
        inputs: dict with `token_ids` int32 `[B, L]`, `segment_ids` int32 `[B, L]`,
            `padding_mask` int32/bool `[B, L]` (1 = real token). Other keys are ignored.
        training: bool, enables dropout.

    Returns:
        float32 logits `[B, num_classes]` (for regression, `[B, 1]` predictions).

    Example:
    >>> from xlnet_tf.models.xlnet_config import XLNetConfig
    >>> from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2,
    ...     head_dim=4, hidden_dim=8, intermediate_dim=16))
    >>> model = XLNetClassifier(backbone, num_classes=3)
    >>> logits = model({"token_ids": [[5, 5, 11, 12, 4, 3]], "segment_ids": [[4, 4, 0, 0, 0, 2]],
    ...                 "padding_mask": [[0, 0, 1, 1, 1, 1]]})
    >>> tuple(logits.shape)
    (1, 3)
    """

    preprocessor_class_name = "XLNetClassifierPreprocessor"

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
        features = self.backbone_inputs(inputs)
        sequence, head_seed = self.backbone_sequence(features, training)  # [B, L, H]
        index = cls_positions(features["token_ids"], features["padding_mask"], self.cls_token_id)
        summary = gather_positions(sequence, index)  # [B, H]
        summary = self.summary_projection(summary)
        summary = seeded_dropout.apply_dropout(self.summary_dropout, summary, training, head_seed)
        return ops.cast(self.logits_dense(summary), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout,
                       "cls_token_id": self.cls_token_id})
        return config
