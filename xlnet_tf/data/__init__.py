"""tf.data readers: pretraining records with online permutation sampling, fine-tuning inputs.

Names are imported on first use, so that importing the package (or one light module of it) does not
load TensorFlow.
"""

from xlnet_tf._lazy_exports import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(__name__, {
    "pretraining_dataset": "xlnet_tf.data.pretraining",
    "pretraining_steps_per_epoch": "xlnet_tf.data.pretraining",
    "PretrainingRecords": "xlnet_tf.data.pretraining_records",
    "RecordsError": "xlnet_tf.data.pretraining_records",
})
