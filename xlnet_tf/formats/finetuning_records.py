"""The v1 fine-tuning record format: per-split shards of packed examples and their manifest.

Layout (full specification in `xlnet_tf/formats/README.md`): `xlnet-tf prepare-finetuning`
writes `{split}-SSSSS-of-NNNNN.tfrecord` shards of `tf.train.Example`s and `manifest.json`
into one directory; `xlnet_tf.data.finetuning_record_dataset` reads them back.

Example:
    >>> from xlnet_tf.formats import finetuning_records
    >>> finetuning_records.shard_file_name("train", 3, 8)
    'train-00003-of-00008.tfrecord'
"""

from xlnet_tf.formats import pretraining_records as _pretraining_records

FORMAT = "xlnet_tf.finetuning.v1"
MANIFEST_FILE = "manifest.json"
# The Beam job's shards report their record counts here; `run` folds them into the manifest
# and removes the file.
SHARD_COUNTS_FILE = "_shard_counts"
SHARD_SUFFIX = ".tfrecord"

# Packed inputs, int64 [L] in every record (the packer's outputs); a long-document task
# (manifest `max_segments` S > 1) stores its S segments flattened, int64 [S * L].
TOKEN_IDS_KEY = "token_ids"
SEGMENT_IDS_KEY = "segment_ids"
PADDING_MASK_KEY = "padding_mask"
FEATURE_KEYS = (TOKEN_IDS_KEY, SEGMENT_IDS_KEY, PADDING_MASK_KEY)
# `segment_ids` values: A and its `<sep>`, B and its `<sep>`, `<cls>`, padding (the original
# `SEG_ID_*`). The model only compares segment ids for equality; these follow the released recipes.
SEGMENT_A = 0
SEGMENT_B = 1
SEGMENT_CLS = 2
SEGMENT_PAD = 4
# bytes []: `{split}-{index:09d}`, the example's position in its input.
EXAMPLE_ID_KEY = "example_id"
# int64 []: which window of a long SQuAD passage the record is.
WINDOW_INDEX_KEY = "window_index"
# int64 [] (classification / regression): 1 when packing cut the example to fit S * L pieces.
TRUNCATED_KEY = "truncated"
# Labels: int64 [] (classification) or float [] (regression) ...
LABEL_KEY = "label"
# ... int64 [L] (token classification) ...
LABELS_KEY = "labels"
# ... or three int64 [] (span).
SPAN_LABEL_KEYS = ("start_position", "end_position", "is_impossible")

# Label of a position the loss skips (special tokens, padding, non-first word pieces);
# also Keras' `ignore_class` of the token classifier's loss.
IGNORE_LABEL = -100

# Top-level keys of `manifest.json` (written with sorted keys).
MANIFEST_KEYS = (
    "format", "sequence_length", "max_segments", "task", "splits", "examples", "inputs", "num_records",
    "vocabulary", "settings",
)
# Keys of one entry of `manifest["inputs"]` (one per input file): its split, then how the file was
# read, as in the pretraining manifest (`pretraining_records.INPUT_ENTRY_KEYS`).
INPUT_ENTRY_KEYS = ("split",) + _pretraining_records.INPUT_ENTRY_KEYS
# Keys of `manifest["task"]`.
TASK_ENTRY_KEYS = ("task_type", "num_classes", "label_names", "has_text_pair")
# Keys of one entry of `manifest["splits"][split]["files"]`.
SHARD_ENTRY_KEYS = ("file", "num_records")


def shard_file_name(split, shard, num_shards):
    """The file name of shard `shard` of `num_shards` of `split`: `train-00003-of-00008.tfrecord`."""
    return f"{split}-{shard:05d}-of-{num_shards:05d}{SHARD_SUFFIX}"

