"""Reader of the fine-tuning TFRecords written by `xlnet-tf prepare-finetuning`.

Format "xlnet_tf.finetuning.v1" (specified in `xlnet_tf/formats/README.md`): per split,
`{split}-SSSSS-of-NNNNN.tfrecord` files of `tf.train.Example`s with the packer's
outputs and the label, and a `manifest.json` next to them. A long-document task
(manifest `max_segments` S > 1) stores each example's S segments flattened; the
reader gives them back as `[S, L]`.
"""

import json
import os

import tensorflow as tf

from xlnet_tf.tasks import task_type
from xlnet_tf.formats.finetuning_records import EXAMPLE_ID_KEY
from xlnet_tf.formats.finetuning_records import FEATURE_KEYS
from xlnet_tf.formats.finetuning_records import FORMAT
from xlnet_tf.formats.finetuning_records import MANIFEST_FILE as MANIFEST
from xlnet_tf.formats.finetuning_records import TRUNCATED_KEY


def read_finetuning_manifest(directory):
    """Loads and checks `directory/manifest.json`.

    Args:
        directory: output directory of `xlnet-tf prepare-finetuning`.

    Returns:
        The manifest dict.

    Raises:
        FileNotFoundError: no manifest in `directory`.
        ValueError: the manifest is not of format "xlnet_tf.finetuning.v1".
    """
    path = os.path.join(directory, MANIFEST)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"No fine-tuning manifest at {path!r} (write the records with "
                                "`xlnet-tf prepare-finetuning`).")
    with tf.io.gfile.GFile(path) as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path!r} has format {manifest.get('format')!r}, expected {FORMAT!r}.")
    return manifest


def records_manifest(task, entry):
    """The manifest of `task.records_dir` where the run needs it, read once; None otherwise.

    A run reads it when the records are its only training data (what they were written
    for), or when they may be its evaluation data: no other evaluation set is named and
    its task type scores records (whether they hold the evaluation split).
    """
    records_train = not (task.train_file or task.dataset)
    records_eval = not (task.eval_file or task.dataset) and entry.evaluates_records()
    if not task.records_dir or not (records_train or records_eval):
        return None
    return read_finetuning_manifest(task.records_dir)


def records_max_segments(manifest):
    """Segments per example of a records directory: the manifest's `max_segments` (1 when absent)."""
    value = manifest.get("max_segments", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"The fine-tuning manifest's max_segments must be an int >= 1, got {value!r}.")
    return value


def _feature_spec(entry, length):
    """The `tf.io.parse_single_example` spec of a record of task type `entry` (`xlnet_tf.tasks`)."""
    spec = {k: tf.io.FixedLenFeature([length], tf.int64) for k in FEATURE_KEYS}
    spec[EXAMPLE_ID_KEY] = tf.io.FixedLenFeature([], tf.string)
    # Token classification records do not carry the flag: they read as -1 (unknown).
    spec[TRUNCATED_KEY] = tf.io.FixedLenFeature([], tf.int64, default_value=-1)
    for key in entry.record_label_keys:
        spec[key] = tf.io.FixedLenFeature(entry.record_label_shape(length),
                                          tf.float32 if entry.score_labels else tf.int64)
    for key in entry.record_window_keys():
        spec[key] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def finetuning_record_dataset(directory, split, *, shuffle=False, seed=None, with_example_id=False,
                              with_truncation=False):
    """Unbatched `(features, label)` pairs of one split.

    Args:
        directory: output directory of `xlnet-tf prepare-finetuning`.
        split: split name, e.g. "train" (a key of the manifest's `splits`).
        shuffle: shuffle the files and interleave them (records keep their order
            inside a file; add `Dataset.shuffle` for example-level shuffling).
        seed: seed of the file shuffle.
        with_example_id: add `example_id` (and `window_index` for spans) to features.
        with_truncation: add `truncated` int32 `[]` to features (1 = the example was cut
            to fit; -1 = unknown, records written without the flag).

    Returns:
        A `tf.data.Dataset` of `(features, label)`: features `token_ids`,
        `segment_ids`, `padding_mask` int32 `[L]` (`[S, L]` when the manifest's
        `max_segments` S is > 1: the long-document layout; `[C, L]` / `[C, S, L]` for multiple
        choice, C the manifest's `num_classes`); label int32 `[]` (classification, multiple
        choice), float32 `[]` (regression), int32 `[L]` with -100 on
        unlabelled positions (token classification), or a dict `start_position`,
        `end_position`, `is_impossible` int32 `[]` (span).

    Example:

    ```python
    from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset
    ds = finetuning_record_dataset("data/sst2", "train", shuffle=True, seed=0)
    ds = ds.shuffle(10000).batch(32, drop_remainder=True)
    ```
    """
    manifest = read_finetuning_manifest(directory)
    if split not in manifest["splits"]:
        raise ValueError(f"{directory!r} has no split {split!r}; it has {sorted(manifest['splits'])}.")
    entry = task_type(manifest["task"]["task_type"])
    length = int(manifest["sequence_length"])
    segments = records_max_segments(manifest)
    # Multiple choice: the C options of a question, flattened in one record.
    choices = entry.record_choices(manifest["task"])
    files = [os.path.join(directory, shard["file"]) for shard in manifest["splits"][split]["files"]]
    missing = [path for path in files if not tf.io.gfile.exists(path)]
    if missing:
        raise FileNotFoundError(f"Record files listed in the manifest are missing: {missing[:3]}.")
    spec = _feature_spec(entry, length * segments * max(choices, 1))
    shape = ([choices] if choices else []) + ([segments] if segments > 1 else []) + [length]

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        features = {k: tf.reshape(tf.cast(example[k], tf.int32), shape) for k in FEATURE_KEYS}  # [C?, S?, L]
        if with_truncation:
            features[TRUNCATED_KEY] = tf.cast(example[TRUNCATED_KEY], tf.int32)
        if with_example_id:
            features[EXAMPLE_ID_KEY] = example[EXAMPLE_ID_KEY]
            for key in entry.record_window_keys():
                features[key] = tf.cast(example[key], tf.int32)
        labels = {k: example[k] if entry.score_labels else tf.cast(example[k], tf.int32)
                  for k in entry.record_label_keys}
        return features, labels if len(labels) > 1 else labels[entry.record_label_keys[0]]

    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed)
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    else:
        dataset = dataset.flat_map(tf.data.TFRecordDataset)
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
