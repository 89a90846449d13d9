"""tf.data readers: pretraining records with online permutation sampling."""

from xlnet_tf.data.pretraining import pretraining_dataset, pretraining_steps_per_epoch
from xlnet_tf.data.pretraining_records import PretrainingRecords, RecordsError

__all__ = ["pretraining_dataset", "pretraining_steps_per_epoch", "PretrainingRecords", "RecordsError"]
