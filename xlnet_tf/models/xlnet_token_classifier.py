"""`XLNetTokenClassifier`: one label per token (NER-style) on an XLNet backbone."""

import keras
from keras import ops

from xlnet_tf.formats.finetuning_records import IGNORE_LABEL
from xlnet_tf import tasks
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.xlnet_task import XLNetTask
from xlnet_tf.preprocessing.xlnet_token_classifier_preprocessor import (WORD_LISTS, XLNetTokenClassifierPreprocessor,
                                                                         word_lists)


@keras.saving.register_keras_serializable(package="xlnet_tf")
@tasks.register_task_model(tasks.TOKEN_CLASSIFICATION)
class XLNetTokenClassifier(XLNetTask):
    """Dropout and a dense layer on every content-stream output.

    Labels are per piece; the usual word-level scheme (label on the first piece
    of each word, the other pieces and the special tokens ignored) is produced
    by `xlnet_tf.data.finetuning` with `label_weights`.

    Args:
        backbone: an `XLNetBackbone`.
        num_classes: number of tags.
        dropout: dropout rate before the classifier.
        **kwargs: `name`, `dtype`, `trainable`.

    With an `XLNetTokenClassifierPreprocessor`, `fit`/`evaluate`/`predict` take
    word lists, one list per sentence, of any lengths (`[["New", "York"],
    ["Paris"]]`), and word labels alike; each sentence is packed alone, so its
    logits do not depend on the rest of the batch. Sentences as plain strings are
    refused with how to split them.

    Call arguments:
        inputs: dict with `token_ids`, `segment_ids`, `padding_mask`, each int32 `[B, L]`.
        training: bool, enables dropout.

    Returns:
        float32 logits `[B, L, num_classes]`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig, XLNetTokenClassifier
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=32, num_layers=2, num_heads=2,
    ...                                      head_dim=4, hidden_dim=8, intermediate_dim=16))
    >>> model = XLNetTokenClassifier(backbone, num_classes=9)
    >>> ids = np.full((2, 16), 11)
    >>> features = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    >>> model(features).shape
    TensorShape([2, 16, 9])
    """

    preprocessor_cls = XLNetTokenClassifierPreprocessor
    text_inputs = WORD_LISTS

    def _text_inputs(self, x):
        # Ragged Python lists as a ragged tensor: keras-hub's data set cannot slice them as lists.
        return word_lists(super()._text_inputs(x), type(self).__name__)

    def _text_labels(self, y):
        if isinstance(y, list) and all(isinstance(row, (list, tuple)) for row in y):
            import tensorflow as tf  # the data side: labels go into keras-hub's tf.data pipeline

            return tf.ragged.constant(y, dtype=tf.int32, ragged_rank=1)  # one label per word
        return y

    def __init__(self, backbone, num_classes=2, dropout=0.1, **kwargs):
        super().__init__(backbone, **kwargs)
        if int(num_classes) < 2:
            raise ValueError(f"XLNetTokenClassifier.num_classes must be >= 2, got {num_classes}.")
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.output_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                   name="output_dropout")
        self.logits_dense = keras.layers.Dense(
            self.num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range),
            dtype=self.dtype_policy, name="logits")
        self.build()

    @classmethod
    def default_compile_arguments(cls, **unused):
        """Per-piece cross-entropy; label -100 (special tokens, non-first pieces) is ignored."""
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)}

    def build_head(self, hidden_dim):
        self.logits_dense.build((None, None, hidden_dim))

    def call(self, inputs, training=None):
        # One step seed (None outside fit): backbone and head masks survive a resume.
        step_seed = seeded_dropout.training_dropout_seed(self, training)
        sequence = self.backbone(
            self.backbone_inputs(inputs), training=training,
            dropout_seed=seeded_dropout.sub_seed(step_seed, seeded_dropout.BACKBONE_SEED),
        )["sequence_output"]  # [B, L, H]
        sequence = seeded_dropout.apply_dropout(
            self.output_dropout, sequence, training,
            seeded_dropout.sub_seed(step_seed, seeded_dropout.HEAD_SEED))
        return ops.cast(self.logits_dense(sequence), "float32")  # [B, L, C]

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout})
        return config
