"""`FinetuningJobSettings`: how `xlnet-tf prepare-finetuning` reads, shards and writes, beside the task.

Example:
>>> from xlnet_tf.beam.finetuning_job_settings import FinetuningJobSettings
>>> FinetuningJobSettings(output_dir="data/sst2", num_shards=8).seed
0
"""

import dataclasses

# JSONL files larger than this are read in ranges of this size, in parallel.
DEFAULT_READ_RANGE_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class FinetuningJobSettings:
    """The Beam job's own settings; the task (`xlnet_tf.tasks.task_spec.TaskSpec`) says what is packed.

    The manifest's `settings` records both (all but `output_dir`), in the order of the fields.

    Args:
        output_dir: where the records and `manifest.json` go (local or any `tf.io.gfile` scheme).
        num_shards: record files per split.
        seed: decides the shard of each example.
        encode_batch_size: examples packed per call of the encoder.
        strict: a bad example stops the job, naming its file and line, instead of being skipped and counted.
        tfds: the TFDS dataset read (`--tfds`), or None for local files.
        tfds_data_dir: TFDS data directory (None: TFDS's default).
        tfds_read_shards: each TFDS split is read as this many even sub-splits.
        tfds_text_fields: the dataset's text features (`xlnet_tf.data.finetuning_tasks`), or None.
        tfds_label_field: `--label-field` for a TFDS dataset, or None for its own.
        input: the `--input SPLIT=FILES` arguments as given.
        read_range_bytes: JSONL files larger than this are read in ranges of this many bytes.
        shared_filesystem: local paths are on a filesystem every worker mounts.
    """

    output_dir: str
    num_shards: int = 4
    seed: int = 0
    encode_batch_size: int = 256
    strict: bool = False
    tfds: str | None = None
    tfds_data_dir: str | None = None
    tfds_read_shards: int = 1
    tfds_text_fields: list[str] | None = None
    tfds_label_field: str | None = None
    input: list[str] = dataclasses.field(default_factory=list)
    read_range_bytes: int = DEFAULT_READ_RANGE_BYTES
    shared_filesystem: bool = False

    def recorded(self):
        """The settings as the manifest records them (all but `output_dir`), in field order."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if field.name != "output_dir"}
