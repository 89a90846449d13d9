"""The v1 fine-tuning record layout: label keys per task type, shard names."""

import pytest

from xlnet_tf import tasks
from xlnet_tf.formats import finetuning_records


def test_label_keys_per_task_type():
    # The task table names each task type's record labels (`xlnet_tf.tasks`).
    keys = {name: entry.record_label_keys for name, entry in tasks.TASKS.items()}
    assert keys == {
        "classification": (finetuning_records.LABEL_KEY,),
        "regression": (finetuning_records.LABEL_KEY,),
        "multiple_choice": (finetuning_records.LABEL_KEY,),
        "token_classification": (finetuning_records.LABELS_KEY,),
        "span": finetuning_records.SPAN_LABEL_KEYS,
    }
    with pytest.raises(ValueError, match="Unknown task type 'ranking'"):
        tasks.task_type("ranking")


def test_packed_feature_keys_and_ignore_label():
    assert finetuning_records.FEATURE_KEYS == (
        finetuning_records.TOKEN_IDS_KEY, finetuning_records.SEGMENT_IDS_KEY, finetuning_records.PADDING_MASK_KEY)
    # Keras' sparse cross-entropy `ignore_class` of the token classifier: pinned literally.
    assert finetuning_records.IGNORE_LABEL == -100


def test_shard_names():
    assert finetuning_records.shard_file_name("train", 3, 8) == "train-00003-of-00008.tfrecord"
    assert finetuning_records.shard_file_name("validation", 0, 1).endswith(finetuning_records.SHARD_SUFFIX)
    assert finetuning_records.SHARD_COUNTS_FILE != finetuning_records.MANIFEST_FILE
