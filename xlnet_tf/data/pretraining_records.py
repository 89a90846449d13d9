"""The pretraining records on disk: shard files, their manifest, and token-range lookups.

The record format (v1, specified in `xlnet_tf/formats/README.md`) is written by
`xlnet_tf/beam/pretraining_data.py`: every shard file
holds one contiguous token stream cut into records of `chunk_length` tokens, and
`manifest.json` next to the shards gives each shard's record and token counts. This
module reads and checks the manifest only; it never opens a shard.
"""

import dataclasses
import json
import os

import tensorflow as tf

from xlnet_tf.formats.pretraining_records import FORMAT as MANIFEST_FORMAT
from xlnet_tf.formats.pretraining_records import MANIFEST_FILE as MANIFEST_NAME
from xlnet_tf.formats.pretraining_records import SHARD_GLOB as DEFAULT_SHARD_GLOB
from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS as RELEASED_SPECIAL_IDS


class RecordsError(ValueError):
    """Pretraining records that cannot be used: missing files, bad manifest, too little data."""


@dataclasses.dataclass(frozen=True)
class Shard:
    """One shard file and its place in the concatenated token stream.

    Attributes:
        path: full path of the TFRecord file.
        num_records: records in the file.
        num_tokens: tokens in the file's stream.
        chunk_length: tokens per record (the last record may hold fewer).
        offset: position of the shard's first token in the concatenation of all shards.
    """

    path: str
    num_records: int
    num_tokens: int
    chunk_length: int
    offset: int


class PretrainingRecords:
    """The shards matched by a file pattern, checked against their manifests.

    The shards are laid end to end, in manifest order (directory by directory, sorted),
    into one virtual token stream of `num_tokens` tokens; readers address it by global
    token position and `pieces()` translates a position range back to
    (shard, first record, record count) reads. No shard is opened here.

    Args:
        file_pattern (str): a glob of shard files (e.g. `records/pretrain-*.tfrecord`), a comma
            separated list of globs, or a records directory (then its `pretrain-*.tfrecord`).
            Local paths and any filesystem `tf.io.gfile` knows (`gs://...`).

    Raises:
        RecordsError: no file matches, a manifest is missing or of another format, a
            matched file is not listed in its manifest, counts are inconsistent, or two
            directories were built with different vocabularies.

    Example:
        >>> from xlnet_tf.data import PretrainingRecords
        >>> records = PretrainingRecords("records/pretrain-*.tfrecord")
        >>> records.num_tokens, records.special_ids["sep"]
        (4096, 4)
    """

    def __init__(self, file_pattern):
        self.file_pattern = file_pattern
        paths = self._match(file_pattern)
        by_dir = {}
        for path in paths:
            by_dir.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
        shards, vocabularies = [], {}
        offset = 0
        for directory in sorted(by_dir):
            manifest = self._load_manifest(directory)
            vocabularies[directory] = manifest.get("vocabulary") or {}
            listed = {entry["file"]: entry for entry in manifest["shards"]}
            unknown = sorted(by_dir[directory] - set(listed))
            if unknown:
                raise RecordsError(
                    f"Files matched by {file_pattern!r} are not listed in "
                    f"{os.path.join(directory, MANIFEST_NAME)}: {unknown[:5]}"
                    f"{' ...' if len(unknown) > 5 else ''}.")
            chunk = int(manifest["chunk_length"])
            for entry in manifest["shards"]:
                if entry["file"] not in by_dir[directory]:
                    continue
                shard = Shard(os.path.join(directory, entry["file"]), int(entry["num_records"]),
                              int(entry["num_tokens"]), chunk, offset)
                expected_records = -(-shard.num_tokens // chunk)
                if shard.num_records != expected_records:
                    raise RecordsError(
                        f"{os.path.join(directory, MANIFEST_NAME)}: shard {entry['file']} has "
                        f"num_tokens={shard.num_tokens} with chunk_length={chunk}, which needs "
                        f"{expected_records} records, but num_records={shard.num_records}.")
                if shard.num_tokens:
                    shards.append(shard)
                    offset += shard.num_tokens
        checksums = {v.get("sha256") for v in vocabularies.values()}
        if len(checksums) > 1:
            raise RecordsError(
                f"The directories matched by {file_pattern!r} were built with different "
                f"vocabularies (sha256 {sorted(str(c) for c in checksums)}); use one vocabulary.")
        self.shards = tuple(shards)
        self.num_tokens = offset
        self.vocabulary = next(iter(vocabularies.values()))
        self.special_ids = dict(RELEASED_SPECIAL_IDS, **self.vocabulary.get("special_ids", {}))
        if not self.num_tokens:
            raise RecordsError(f"The files matched by {file_pattern!r} hold no tokens.")

    @staticmethod
    def _match(file_pattern):
        patterns = [p.strip() for p in str(file_pattern).split(",") if p.strip()]
        if not patterns:
            raise RecordsError(f"Empty file pattern {file_pattern!r} for pretraining records.")
        paths = []
        for pattern in patterns:
            if tf.io.gfile.isdir(pattern):
                pattern = os.path.join(pattern, DEFAULT_SHARD_GLOB)
            matched = [p for p in tf.io.gfile.glob(pattern) if os.path.basename(p) != MANIFEST_NAME]
            if not matched:
                raise RecordsError(f"No pretraining record files match {pattern!r}.")
            paths.extend(matched)
        return sorted(set(paths))

    def _load_manifest(self, directory):
        path = os.path.join(directory, MANIFEST_NAME)
        if not tf.io.gfile.exists(path):
            raise RecordsError(
                f"Missing {path}: the records matched by {self.file_pattern!r} need the manifest "
                f"written next to them by `xlnet-tf prepare-pretraining`.")
        try:
            with tf.io.gfile.GFile(path, "r") as f:
                manifest = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise RecordsError(f"{path} is not valid JSON: {e}") from e
        if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
            found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
            raise RecordsError(f"{path} has format {found!r}; expected {MANIFEST_FORMAT!r}.")
        for key in ("chunk_length", "shards"):
            if key not in manifest:
                raise RecordsError(f"{path} lacks the key {key!r}.")
        if int(manifest["chunk_length"]) <= 0:
            raise RecordsError(f"{path}: chunk_length must be positive, got {manifest['chunk_length']}.")
        for i, entry in enumerate(manifest["shards"]):
            missing = [k for k in ("file", "num_records", "num_tokens") if k not in entry]
            if missing:
                raise RecordsError(f"{path}: shards[{i}] lacks {missing}.")
        return manifest

    @property
    def vocabulary_size(self):
        """The vocabulary size recorded in the manifest, or None."""
        size = self.vocabulary.get("vocabulary_size")
        return None if size is None else int(size)

    def pieces(self, start, stop):
        """Splits the global token range [start, stop) into per-shard reads.

        Args:
            start (int): first global token position (int).
            stop (int): one past the last position (int), `start <= stop <= num_tokens`.

        Returns:
            A list of `(shard, first_record, num_records, begin, end)`: read `num_records`
            records from `first_record` of `shard`, keep shard-local positions [begin, end).
        """
        if not 0 <= start <= stop <= self.num_tokens:
            raise ValueError(f"Token range [{start}, {stop}) is outside [0, {self.num_tokens}).")
        pieces = []
        for shard in self.shards:
            begin = max(start, shard.offset) - shard.offset
            end = min(stop, shard.offset + shard.num_tokens) - shard.offset
            if begin >= end:
                continue
            first = begin // shard.chunk_length
            last = (end - 1) // shard.chunk_length
            pieces.append((shard, first, last - first + 1, begin, end))
        return pieces
