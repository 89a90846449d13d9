"""The v1 pretraining record format and its one writer.

Layout (full specification in `xlnet_tf/formats/README.md`): a records directory holds
`pretrain-SSSSS-of-NNNNN.tfrecord` shards and `manifest.json`. Each shard is one
contiguous token stream of whole documents, each followed by `<eod>`, cut into
`tf.train.Example` records of `chunk_length` tokens with two int64 lists, `token_ids`
and `sentence_ids`.

`serialize_packed_records` is the format's only writer: the Beam job and the tests' record
helpers all call it, so the bytes they write are the same.

Example:
    >>> from xlnet_tf.formats.pretraining_records import (packed_varints, record_cuts,
    ...                                                   serialize_packed_records, shard_file_name)
    >>> (tokens, token_offsets), (sentences, _) = packed_varints([10, 11, 7]), packed_varints([0, 0, 1])
    >>> cuts = record_cuts(3, chunk_length=2)
    >>> records = serialize_packed_records(tokens, token_offsets[cuts], sentences, cuts)
    >>> len(records), shard_file_name(3, 16)
    (2, 'pretrain-00003-of-00016.tfrecord')
"""

import functools

FORMAT = "xlnet_tf.pretraining.v1"
MANIFEST_FILE = "manifest.json"

# Feature keys of every record, in the order the serializer writes them.
TOKEN_IDS_KEY = "token_ids"
SENTENCE_IDS_KEY = "sentence_ids"
FEATURE_KEYS = (TOKEN_IDS_KEY, SENTENCE_IDS_KEY)

SHARD_PREFIX = "pretrain"
SHARD_SUFFIX = ".tfrecord"
# What a records directory's shards match when a reader is given the directory itself.
SHARD_GLOB = f"{SHARD_PREFIX}-*{SHARD_SUFFIX}"

# Top-level keys of `manifest.json` (written with sorted keys).
MANIFEST_KEYS = (
    "format", "chunk_length", "num_shards", "shards", "num_tokens", "num_records", "documents", "files",
    "lines_split", "inputs", "vocabulary", "settings",
)
# Keys of one entry of `manifest["inputs"]` (one per input file): `ranges` read in parallel, or
# `read_whole` giving why the file cannot be split (None when it was split or small enough).
# The fine-tuning manifest's entries are these plus the split.
INPUT_ENTRY_KEYS = ("file", "ranges", "read_whole")
# Keys of one entry of `manifest["shards"]`.
SHARD_ENTRY_KEYS = ("file", "num_records", "num_tokens", "num_documents")
# Keys of `manifest["vocabulary"]`; its `special_ids` is `special_tokens.SPECIAL_TOKEN_IDS`
# unless the vocabulary says otherwise.
VOCABULARY_ENTRY_KEYS = ("file", "sha256", "vocabulary_size", "special_ids")


def shard_file_name(shard, num_shards):
    """The file name of shard `shard` of `num_shards`: `pretrain-00003-of-00016.tfrecord`."""
    return f"{SHARD_PREFIX}-{shard:05d}-of-{num_shards:05d}{SHARD_SUFFIX}"


def _varint_bytes(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# Record framing needs varints of lengths, the same few over and over. A cache, not a module-level
# table: Beam's type inference walks the globals the job's functions read, and a large tuple there
# is walked on every visit, which makes building the pipeline slow.
@functools.lru_cache(maxsize=1 << 14)
def _varint(value):
    return _varint_bytes(value)


def packed_varints(values):
    """Varint-encodes non-negative `values` [N] (< 2**32) at once; returns (bytes [K] uint8, offsets [N+1]).

    The bytes are the values' protobuf varints one after another; value `i` is `bytes[offsets[i]:offsets[i + 1]]`.

    Example:
        >>> from xlnet_tf.formats.pretraining_records import packed_varints
        >>> encoded, offsets = packed_varints([7, 300])
        >>> encoded.tolist(), offsets.tolist()
        ([7, 172, 2], [0, 1, 3])
    """
    # numpy is imported here, not at the top, so that importing `xlnet_tf.formats` stays free
    # of heavy modules for light readers of the constants.
    import numpy as np  # import time: `xlnet_tf.formats` loads nothing heavy

    values = np.asarray(values)
    top = int(values.max()) if values.size else 0
    if values.size and (values.min() < 0 or top >= 1 << 32):
        raise ValueError("token and sentence ids must be in [0, 2**32).")
    v = values.astype(np.uint32)  # [N]
    if top < 0x80:
        # One byte per value (sentence ids are 0/1): the value is its own varint.
        return v.astype(np.uint8), np.arange(v.size + 1, dtype=np.int64)
    width = 1  # bytes of the largest value
    while top >= 1 << (7 * width):
        width += 1
    num_bytes = np.ones(v.shape, np.uint8)  # [N]
    for k in range(1, width):
        num_bytes += v >= (1 << (7 * k))
    offsets = np.zeros(v.size + 1, np.int64)  # [N+1]
    np.cumsum(num_bytes, out=offsets[1:])
    encoded = np.empty(int(offsets[-1]), np.uint8)  # [K]
    # Byte k of every value that has one, scattered to its place: one pass per byte position over only the
    # values still that long (most token ids take 2 bytes), not a 2-D table cut by a mask.
    at, rest, more = offsets[:-1], v, num_bytes > 1  # [N'] each
    for _ in range(width):
        encoded[at] = (rest & 0x7F).astype(np.uint8) | (more.view(np.uint8) << 7)  # continuation bit
        if not more.any():
            break
        at, rest = at[more] + 1, rest[more] >> 7
        more = rest >= 0x80
    return encoded, offsets


@functools.lru_cache(maxsize=1 << 12)
def _int64_feature_head(name, num_bytes):
    """The bytes before the packed ids in one `map<string, Feature>` entry of `Features.feature` (framed as
    field 1 of `Features`) whose int64 list's varints take `num_bytes`: the same few lengths recur record
    after record, so each head is built once."""
    int64_list = 1 + len(_varint(num_bytes)) + num_bytes  # Int64List.value (field 1, packed)
    feature = 1 + len(_varint(int64_list)) + int64_list  # Feature.int64_list (field 3)
    entry = 1 + len(_varint(len(name))) + len(name) + 1 + len(_varint(feature)) + feature  # key 1, value 2
    return b"".join((b"\n", _varint(entry), b"\n", _varint(len(name)), name, b"\x12", _varint(feature),
                     b"\x1a", _varint(int64_list), b"\n", _varint(num_bytes)))


def record_cuts(num_values, chunk_length):
    """Value indexes where the records of a `num_values`-value stream begin, and its end: `[R+1]` int64.

    Also the byte offsets of those cuts when every value takes one byte (`sentence_ids`, 0 or 1).

    Example:
        >>> from xlnet_tf.formats.pretraining_records import record_cuts
        >>> record_cuts(7, 3).tolist()
        [0, 3, 6, 7]
    """
    import numpy as np  # import time: `xlnet_tf.formats` loads nothing heavy

    return np.append(np.arange(0, num_values, chunk_length, dtype=np.int64), np.int64(num_values))


def varint_offsets(encoded, every=1):
    """Byte offsets in varint bytes `encoded` `[K]` uint8 of values `0, every, 2 * every, ...`, and of the end.

    A varint ends at its byte below 0x80. With `every=1` these are all the
    values' offsets `[N+1]`; with `every=chunk_length` they are the record cuts
    (`record_cuts`), found block by block, so a shard of many millions of
    tokens never needs an offset per token.

    Example:
        >>> from xlnet_tf.formats.pretraining_records import varint_offsets
        >>> import numpy as np
        >>> varint_offsets(np.array([7, 172, 2], np.uint8)).tolist()
        [0, 1, 3]
        >>> varint_offsets(np.array([7, 172, 2, 9], np.uint8), every=2).tolist()
        [0, 3, 4]
    """
    import numpy as np  # import time: `xlnet_tf.formats` loads nothing heavy

    encoded = np.asarray(encoded)
    parts, seen = [np.zeros(1, np.int64)], 0  # seen: values ended before the block
    block = 1 << 20  # bytes per block: its terminator positions stay in the CPU cache
    for begin in range(0, encoded.size, block):
        ends = np.flatnonzero(encoded[begin:begin + block] < 0x80)  # [n], value seen + i ends at ends[i]
        # Value j closes a cut when (j + 1) % every == 0.
        parts.append(ends[(-seen - 1) % every::every] + (begin + 1))
        seen += ends.size
    if seen % every:
        parts.append(np.array([encoded.size], np.int64))  # the last, shorter record's end
    return np.concatenate(parts)


def serialize_packed_records(token_bytes, token_cuts, sentence_bytes, sentence_cuts):
    """Serializes varint-encoded ids (`packed_varints`) as `tf.train.Example` records, one per pair of cuts.

    Writes the protobuf wire format directly because building `tf.train.Example`
    objects record by record costs more than SentencePiece itself. The bytes
    parse as `tf.train.Example` with int64 lists `token_ids` and `sentence_ids`,
    in that field order, so they are also byte-for-byte stable across protobuf
    versions. The Beam job varint-encodes token ids where it tokenizes, so the
    bytes it moves between its steps are the records' own (most ids of a
    SentencePiece vocabulary, sorted by frequency, take 1 or 2 bytes).

    Args:
        token_bytes: uint8 `[K]`, the token ids' varints one after another.
        token_cuts: int `[R+1]`, byte offsets in `token_bytes` where each record's
            ids begin, and the end (`varint_offsets(token_bytes, every=chunk_length)`).
        sentence_bytes: uint8 `[K']`, the sentence ids' varints.
        sentence_cuts: int `[R+1]`, the same cuts in `sentence_bytes`.

    Returns:
        A list of `R` serialized records (bytes).

    Example:
        >>> from xlnet_tf.formats.pretraining_records import (packed_varints, record_cuts, serialize_packed_records,
        ...                                                   varint_offsets)
        >>> (tokens, _), (sentences, _) = packed_varints([10, 11, 7]), packed_varints([0, 0, 1])
        >>> cuts = record_cuts(3, chunk_length=2)
        >>> len(serialize_packed_records(tokens, varint_offsets(tokens, every=2), sentences, cuts))
        2
    """
    import numpy as np  # import time: `xlnet_tf.formats` loads nothing heavy

    token_bytes, sentence_bytes = np.asarray(token_bytes).tobytes(), np.asarray(sentence_bytes).tobytes()
    token_cuts, sentence_cuts = np.asarray(token_cuts).tolist(), np.asarray(sentence_cuts).tolist()
    if len(token_cuts) != len(sentence_cuts):
        raise ValueError(f"token_cuts has {len(token_cuts)} cuts and sentence_cuts {len(sentence_cuts)}: the "
                         "token and sentence streams must have the same number of ids.")
    token_key, sentence_key = TOKEN_IDS_KEY.encode(), SENTENCE_IDS_KEY.encode()
    records = []
    for r in range(len(token_cuts) - 1):
        tokens = token_bytes[token_cuts[r]:token_cuts[r + 1]]
        sentences = sentence_bytes[sentence_cuts[r]:sentence_cuts[r + 1]]
        token_head = _int64_feature_head(token_key, len(tokens))
        sentence_head = _int64_feature_head(sentence_key, len(sentences))
        features = len(token_head) + len(tokens) + len(sentence_head) + len(sentences)
        # Example.features (field 1), then the two feature entries, joined once.
        records.append(b"".join((b"\n", _varint(features), token_head, tokens, sentence_head, sentences)))
    return records
