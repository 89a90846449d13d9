"""tf.data reader for XLNet pretraining: continuous row streams and online PLM sampling.

Design (where rows come from):

The shards matched by `file_pattern` are laid end to end, in manifest order, into one
token stream of T tokens. At training time the stream is cut into `G` equal contiguous
*ranges*, one per batch row of the global batch (`G / 2` ranges with `bi_data`, each read
once forward and once backward). Row `i` of every batch reads its range from the start,
`reuse_length` tokens further at each step, exactly as the original `create_tfrecords`
loop walked its rows; so row i of batch t+1 continues row i of batch t and recurrence
memory is meaningful, whatever batch size or replica count is chosen, from the same
records (nothing about batching is baked into the records).

Global rows are numbered (input pipeline, replica of that pipeline, row of the per-replica
batch). Under `distribute_datasets_from_function` each input pipeline reads only the
ranges of its own replicas (disjoint data, only the shards overlapping them), and yields
per-replica batches in turn for its local replicas (element k goes to local replica
k mod R, which is how the distributed iterator hands them out), so every replica's rows
stay continuous. A row reads the records of its range directly: it skips, inside one
shard only, to the first record it needs (TFRecord skipping reads record headers, not
payloads), so start-up cost does not grow with the corpus. A backward row reads its range
in blocks of `reverse_block_tokens` from the end, each block with one such skip.
`first_step` resumes a run by opening every row at that step's position (nothing replayed).

Each example is a function of (seed, epoch, global row, step) only: stateless random ops
are seeded from those, so runs are reproducible, a new epoch gets new masks,
permutations and A/B pairs, and the same row gives the same examples however the rows
are grouped into batches.

Example layout (one row, one step; positions of a `sequence_length` L window):
    [ reuse part (reuse_length) | A <sep> B <sep> <cls> ]
    segment ids 0 for reuse, A and the first <sep>; 1 for B and the second <sep>; 2 for <cls>.
A starts where the reuse part ends and is cut at a sentence boundary; B is the true
continuation half of the time and otherwise a piece of the same row's stream half a range
away (the "distractor" stream), starting at a sentence start.
"""

import hashlib
import logging

import numpy as np
import sentencepiece
import tensorflow as tf

from xlnet_tf.data import plm_sampling
from xlnet_tf.data.pretraining_records import PretrainingRecords, RecordsError
from xlnet_tf.data.check_pretraining_sizes import check_pretraining_sizes

# Dataset functions are plain TF ops; skipping AutoGraph conversion saves tracing time.
_plain = tf.autograph.experimental.do_not_convert

_FEATURES = ("token_ids", "segment_ids", "padding_mask", "perm_mask", "target_mapping",
             "target_ids", "target_mask")


class _Layout:
    """Sizes and row assignment shared by the dataset and `pretraining_steps_per_epoch`."""

    def __init__(self, records, *, sequence_length, reuse_length, num_predict, perm_size,
                 batch_size, bi_data, input_context):
        # The per-replica batch's parity is checked below, once the replicas are known.
        check_pretraining_sizes(sequence_length=sequence_length, reuse_length=reuse_length,
                                num_predict=num_predict, perm_size=perm_size,
                                batch_size=batch_size, bi_data=False)
        self.sequence_length = sequence_length
        self.reuse_length = reuse_length
        self.new_length = sequence_length - reuse_length - 3  # tokens of A + B
        self.window = sequence_length - 3  # stream tokens an example consumes
        # The stream moves by the reuse part, which becomes the next step's memory; with no
        # reuse part it moves past everything the example read.
        self.advance = reuse_length if reuse_length > 0 else self.window
        self.predict_new = num_predict * (sequence_length - reuse_length) // sequence_length
        self.predict_reuse = num_predict - self.predict_new

        if input_context is None:
            pipelines, pipeline_id, replicas = 1, 0, 1
            per_replica = int(batch_size)
        else:
            pipelines = input_context.num_input_pipelines
            pipeline_id = input_context.input_pipeline_id
            if input_context.num_replicas_in_sync % pipelines:
                raise ValueError(f"num_replicas_in_sync={input_context.num_replicas_in_sync} is not a "
                                 f"multiple of num_input_pipelines={pipelines}.")
            replicas = input_context.num_replicas_in_sync // pipelines
            if batch_size % input_context.num_replicas_in_sync:
                raise ValueError(
                    f"The global batch_size={batch_size} does not divide evenly over "
                    f"{input_context.num_replicas_in_sync} replicas; with input_context, batch_size "
                    f"is the global batch and each replica gets batch_size / num_replicas_in_sync.")
            per_replica = input_context.get_per_replica_batch_size(batch_size)
        if bi_data and per_replica % 2:
            raise ValueError(f"bi_data needs an even per-replica batch (forward half, backward "
                             f"half), got {per_replica}.")
        self.per_replica = per_replica
        self.replicas = replicas  # local replicas fed by this pipeline, in turn
        self.bi_data = bool(bi_data)
        global_rows = pipelines * replicas * per_replica
        self.num_ranges = global_rows // 2 if bi_data else global_rows
        self.range_length = records.num_tokens // self.num_ranges
        if self.range_length < self.window:
            raise RecordsError(
                f"The records matched by {records.file_pattern!r} hold {records.num_tokens} tokens: "
                f"too few for {self.num_ranges} row streams of at least {self.window} tokens "
                f"(sequence_length - 3) each. Use a smaller batch or more data.")
        self.steps_per_epoch = (self.range_length - self.window) // self.advance + 1

        # (global row, range index, reverse) for the rows of this pipeline, in the order
        # the pipeline emits them: local replica by local replica, row by row.
        self.rows = []
        half = per_replica // 2
        for replica in range(replicas):
            global_replica = pipeline_id * replicas + replica
            for i in range(per_replica):
                global_row = global_replica * per_replica + i
                if bi_data:
                    self.rows.append((global_row, global_replica * half + i % half, i >= half))
                else:
                    self.rows.append((global_row, global_row, False))


def _drop_front(segments, count, reverse):
    """Drops the first `count` tokens of a directed stream given as [start, stop) segments."""
    kept = []
    for seg_start, seg_stop in segments:
        take = min(count, seg_stop - seg_start)
        count -= take
        kept.append((seg_start, seg_stop - take) if reverse else (seg_start + take, seg_stop))
    return [(a, b) for a, b in kept if b > a]


def _piece_table(records, layout, reverse_block_records, first_step):
    """Flattens every row's streams into one table of shard pieces (column -> numpy array).

    Row r has four streams, pieces [start[4r + k], start[4r + k] + count[4r + k]): k=0 the
    main stream and k=1 the distractor stream of a whole epoch; k=2, 3 the same streams
    from step `first_step` of an epoch (for resuming). Keeping everything in tensors lets
    tf.data trace the reading functions once, whatever the number of rows or shards.
    """
    columns = {k: [] for k in ("path", "first", "count", "begin", "end", "chunk", "last_index",
                               "last_length", "reverse")}
    starts, counts = [], []
    for _, range_index, reverse in layout.rows:
        start = range_index * layout.range_length
        stop = start + layout.range_length
        half = layout.range_length // 2
        if reverse:
            streams = [[(start, stop)], [(start, stop - half), (stop - half, stop)]]
        else:
            streams = [[(start, stop)], [(start + half, stop), (start, start + half)]]
        skipped = first_step * layout.advance
        streams += [_drop_front(segments, skipped, reverse) for segments in streams]
        for segments in streams:
            starts.append(len(columns["path"]))
            for seg_start, seg_stop in segments:
                pieces = records.pieces(seg_start, seg_stop)
                for shard, first, count, begin, end in (pieces[::-1] if reverse else pieces):
                    columns["path"].append(shard.path)
                    columns["first"].append(first)
                    columns["count"].append(count)
                    columns["begin"].append(begin)
                    columns["end"].append(end)
                    columns["chunk"].append(shard.chunk_length)
                    columns["last_index"].append(shard.num_records - 1)
                    columns["last_length"].append(shard.num_tokens - (shard.num_records - 1) * shard.chunk_length)
                    columns["reverse"].append(reverse)
            counts.append(len(columns["path"]) - starts[-1])
    table = {k: tf.constant(v, tf.string if k == "path" else tf.bool if k == "reverse" else tf.int64)
             for k, v in columns.items()}
    return table, tf.constant(starts, tf.int64), tf.constant(counts, tf.int64)


_SPEC = {"token_ids": tf.io.VarLenFeature(tf.int64), "sentence_ids": tf.io.VarLenFeature(tf.int64)}


def _checked_records(piece, first, count):
    """Reads `count` records of the piece's file from record `first`, checking each one.

    Yields (tokens, sentences) int32 `[n]`, trimmed to the piece's token range. A record
    that cannot be read or parsed, or whose length disagrees with the manifest, ends the
    stream with an error naming the file.
    """
    path = piece["path"]
    message = tf.strings.join([
        "Cannot read pretraining records of ", path, ": the file is corrupted or truncated, "
        "or a record is not a v1 pretraining record of the length its manifest.json implies "
        "(chunk_length ", tf.strings.as_string(piece["chunk"]), "). First unreadable record index:"])

    @_plain
    def parse(i, serialized):
        index = first + i
        features = tf.io.parse_single_example(serialized, _SPEC)
        tokens = features["token_ids"].values
        sentences = features["sentence_ids"].values
        expected = tf.where(index == piece["last_index"], piece["last_length"], piece["chunk"])
        checks = [tf.debugging.assert_equal(tf.size(tokens, out_type=tf.int64), expected),
                  tf.debugging.assert_equal(tf.size(sentences, out_type=tf.int64), expected)]
        with tf.control_dependencies(checks):
            position = index * piece["chunk"] + tf.range(tf.size(tokens, out_type=tf.int64))
            keep = (position >= piece["begin"]) & (position < piece["end"])
            return (index, tf.cast(tf.boolean_mask(tokens, keep), tf.int32),
                    tf.cast(tf.boolean_mask(sentences, keep), tf.int32))

    records = tf.data.TFRecordDataset(path).skip(first).take(count).enumerate().map(parse)
    # A bad record stops or skips elements, with an error that would not name the file;
    # the scan below turns the gap into an error that does.
    records = records.ignore_errors()
    end = tf.data.Dataset.from_tensors(
        (tf.constant(-1, tf.int64), tf.zeros([0], tf.int32), tf.zeros([0], tf.int32)))

    @_plain
    def check(expected, element):
        index = element[0]
        ok = tf.where(index < 0, tf.equal(expected, first + count), tf.equal(index, expected))
        assertion = tf.debugging.Assert(ok, [message, expected])
        with tf.control_dependencies([assertion]):
            return expected + 1, element

    return (records.concatenate(end).scan(first, check)
            .filter(_plain(lambda index, tokens, sentences: index >= 0))
            .map(_plain(lambda index, tokens, sentences: (tokens, sentences))))


_SUB_CHUNK = 4096


@_plain
def _reversed_pieces(tokens, sentences):
    """Reverses a block of records and hands it on in short chunks, so the window scan
    never materializes all windows of a large block at once."""
    tokens = tf.reverse(tokens.flat_values, [0])
    sentences = tf.reverse(sentences.flat_values, [0])
    size = tf.size(tokens, out_type=tf.int64)
    return tf.data.Dataset.range(0, size, _SUB_CHUNK).map(
        _plain(lambda i: (tokens[i:i + _SUB_CHUNK], sentences[i:i + _SUB_CHUNK])))


def _piece_stream(piece, reverse_block_records):
    """The tokens of one shard piece as a dataset of 1-D chunks, in stream order.

    Forward pieces stream record by record. Backward pieces are read in blocks of
    `reverse_block_records` records from the end, each block reversed in memory; each
    block's read skips (record headers only) from the start of its shard.
    """
    first, count, reverse = piece["first"], piece["count"], piece["reverse"]
    forward = _checked_records(piece, first, tf.where(reverse, tf.constant(0, tf.int64), count))
    block_size = tf.constant(reverse_block_records, tf.int64)
    blocks = tf.where(reverse, (count + block_size - 1) // block_size, 0)

    @_plain
    def block(j):
        block_first = first + j * block_size
        block_count = tf.minimum(block_size, first + count - block_first)
        chunks = _checked_records(piece, block_first, block_count)
        return chunks.ragged_batch(reverse_block_records).flat_map(_reversed_pieces)

    backward = tf.data.Dataset.range(blocks - 1, -1, -1).flat_map(block)
    # Exactly one of the two is non-empty.
    return forward.concatenate(backward)


def _stream(table, start, count, reverse_block_records):
    """A row stream: pieces [start, start + count) of the table, in order."""
    return tf.data.Dataset.range(start, start + count).flat_map(
        _plain(lambda i: _piece_stream({k: v[i] for k, v in table.items()}, reverse_block_records)))


def _windows(chunks, size, shift):
    """Slides a window of `size` tokens by `shift` over a stream of 1-D chunks."""
    empty = (tf.zeros([0], tf.int32), tf.zeros([0], tf.int32))

    @_plain
    def step(state, chunk):
        tokens = tf.concat([state[0], chunk[0]], axis=0)
        sentences = tf.concat([state[1], chunk[1]], axis=0)
        count = tf.maximum((tf.size(tokens) - size) // shift + 1, 0)
        index = tf.range(count)[:, None] * shift + tf.range(size)[None, :]  # [n, size]
        consumed = count * shift
        return ((tokens[consumed:], sentences[consumed:]),
                (tf.gather(tokens, index), tf.gather(sentences, index)))

    return chunks.scan(empty, step).unbatch()


def _boundaries(tokens, sentences, eod_token_id):
    """bool `[n-1]`: True at j when a sentence starts at j (bit flip, or after `<eod>`)."""
    return tf.not_equal(sentences[1:], sentences[:-1]) | tf.equal(tokens[:-1], eod_token_id)


def _make_example_fn(layout, *, num_predict, perm_size, seed, special_ids, word_start, mask_alpha,
                     max_span, whole_word_targets=False, spans_in_reading_order=False):
    length = layout.sequence_length
    reuse = layout.reuse_length
    new = layout.new_length
    sep_token_id, cls_token_id, eod_token_id = special_ids["sep"], special_ids["cls"], special_ids["eod"]
    base_seed = tf.constant([seed & 0x7FFFFFFF, (seed >> 31) & 0x7FFFFFFF], tf.int64)
    word_start = None if word_start is None else tf.constant(word_start)

    @_plain
    def make(element):
        key = tf.random.experimental.stateless_fold_in(base_seed, element["epoch"])
        key = tf.random.experimental.stateless_fold_in(key, element["row"])
        key = tf.random.experimental.stateless_fold_in(key, element["step"])
        seeds = tf.random.experimental.stateless_split(key, 6)
        window, sentences = element["tokens"], element["sentences"]
        other, other_sentences = element["other_tokens"], element["other_sentences"]
        new_tokens = window[reuse:reuse + new]
        new_sentences = sentences[reuse:reuse + new]

        # A/B cut: a random sentence boundary inside the new part (cut c = length of A).
        is_cut = _boundaries(new_tokens, new_sentences, eod_token_id)  # [new-1]
        draws = tf.random.stateless_uniform([3], seeds[0])
        cut_scores = tf.where(is_cut, tf.random.stateless_uniform([new - 1], seeds[1]), -1.0)
        has_cut = tf.reduce_any(is_cut)
        random_cut = 1 + tf.cast(draws[0] * (new - 1), tf.int32)
        cut = tf.where(has_cut, tf.cast(tf.argmax(cut_scores), tf.int32) + 1,
                       tf.minimum(random_cut, new - 1))
        is_next = has_cut & (draws[1] < 0.5)
        # Random B: starts at the last sentence start at or before a uniform point in
        # [0, cut], so the B of length new - cut fits in the distractor window.
        other_new = other[:new]
        starts = tf.concat([[True], _boundaries(other_new, other_sentences[:new], eod_token_id)], 0)
        point = tf.cast(draws[2] * tf.cast(cut + 1, tf.float32), tf.int32)
        position = tf.range(new, dtype=tf.int32)
        b_start = tf.reduce_max(tf.where(starts & (position <= point), position, 0))

        p = tf.range(length, dtype=tf.int32)
        sep1 = reuse + cut
        from_window = tf.gather(window, tf.clip_by_value(p, 0, layout.window - 1))
        next_b = tf.gather(window, tf.clip_by_value(p - 1, 0, layout.window - 1))
        random_b = tf.gather(other, tf.clip_by_value(b_start + p - sep1 - 1, 0, new - 1))
        in_b = (p > sep1) & (p < length - 2)
        token_ids = tf.where(p < sep1, from_window,
                             tf.where(in_b, tf.where(is_next, next_b, random_b),
                                      tf.where(p == length - 1, cls_token_id, sep_token_id)))
        segment_ids = tf.where(p <= sep1, 0, tf.where(p < length - 1, 1, 2))

        reverse = element["reverse"]
        parts = []
        for part_index, (lo, hi, goal) in enumerate(((0, reuse, layout.predict_reuse),
                                                     (reuse, length, layout.predict_new))):
            if hi == lo:
                continue
            part_tokens = token_ids[lo:hi]
            is_masked = plm_sampling.span_mask(part_tokens, goal, seeds[2 + 2 * part_index],
                                               word_start=word_start, reverse=reverse,
                                               mask_ratio=mask_alpha, max_span=max_span,
                                               whole_words=whole_word_targets)
            order = plm_sampling.factorization_order(hi - lo, perm_size, seeds[3 + 2 * part_index])
            if spans_in_reading_order:
                order = plm_sampling.span_reading_order(order, is_masked, perm_size, reverse)
            parts.append(plm_sampling.factorization_masks(part_tokens, is_masked, order,
                                                          sep_token_id=sep_token_id,
                                                          cls_token_id=cls_token_id))
        if len(parts) == 2:
            (mask_reuse, target_reuse), (mask_new, target_new) = parts
            # The reuse part (next step's memory) never sees the new part; the new part
            # comes later in the order and sees the whole reuse part.
            perm_mask = tf.concat([
                tf.concat([mask_reuse, tf.ones([reuse, length - reuse])], axis=1),
                tf.concat([tf.zeros([length - reuse, reuse]), mask_new], axis=1)], axis=0)  # [L, L]
            is_target = tf.concat([target_reuse, target_new], axis=0)
        else:
            perm_mask, is_target = parts[0]
        example = {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": tf.ones([length], tf.int32),
            "perm_mask": perm_mask,
        }
        example.update(plm_sampling.pack_targets(token_ids, is_target, num_predict))
        shapes = {"token_ids": [length], "segment_ids": [length], "padding_mask": [length],
                  "perm_mask": [length, length], "target_mapping": [num_predict, length],
                  "target_ids": [num_predict], "target_mask": [num_predict]}
        return {k: tf.ensure_shape(example[k], shapes[k]) for k in _FEATURES}

    return make


def _load_word_start(records, sentencepiece_model):
    if sentencepiece_model is None:
        return None
    path = sentencepiece_model
    if path == "auto":
        path = records.vocabulary.get("file")
        if not path or not tf.io.gfile.exists(path):
            logging.getLogger(__name__).warning(
                "The vocabulary file named in the manifest (%r) is not readable; spans are "
                "counted in tokens instead of words. Pass sentencepiece_model= to use words.", path)
            return None
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"sentencepiece_model {path!r} does not exist.")
    with tf.io.gfile.GFile(path, "rb") as f:
        proto = f.read()
    expected = records.vocabulary.get("sha256")
    if expected and hashlib.sha256(proto).hexdigest() != expected:
        raise RecordsError(f"sentencepiece_model {path!r} is not the vocabulary the records were "
                           f"built with (manifest sha256 {expected}).")
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    return plm_sampling.word_start_table(
        [processor.id_to_piece(i) for i in range(processor.get_piece_size())])


def pretraining_steps_per_epoch(file_pattern, *, sequence_length, reuse_length, batch_size, bi_data,
                                input_context=None):
    """Steps in one epoch of `pretraining_dataset` with the same arguments.

    Every row stream reaches its end at the same step; the next epoch starts each row
    over (a break in continuity: reset recurrence memory there).
    """
    check_pretraining_sizes(sequence_length=sequence_length, reuse_length=reuse_length, num_predict=1,
                            perm_size=1, batch_size=batch_size, bi_data=False)
    records = PretrainingRecords(file_pattern)
    layout = _Layout(records, sequence_length=sequence_length, reuse_length=reuse_length,
                     num_predict=1, perm_size=1, batch_size=batch_size, bi_data=bi_data,
                     input_context=input_context)
    return layout.steps_per_epoch


def pretraining_dataset(file_pattern, *, sequence_length, reuse_length, num_predict, perm_size,
                        batch_size, bi_data, seed, input_context=None, num_epochs=None,
                        sentencepiece_model="auto", reverse_block_tokens=1 << 18, first_step=0,
                        mask_alpha=6, max_span=5, whole_word_targets=False, spans_in_reading_order=False):
    """Pretraining batches for XLNet's permutation language model, with static shapes.

    Args:
        file_pattern (str | list[str]): shard glob(s) or records directory of `xlnet-tf prepare-pretraining`
            output (`manifest.json` must sit next to the shards).
        sequence_length (int): L, tokens per example (512 in the paper).
        reuse_length (int): tokens at the start of each example that the next step will see as
            memory; the row stream advances by this much per step (256 in the paper).
        num_predict (int): P, prediction slots per example (85 in the paper); about
            `num_predict * (L - reuse) / L` of them in the new part, the rest in the reuse part.
        perm_size (int): factorization-order block length; must divide `reuse_length` and
            `sequence_length - reuse_length` (256 in the paper).
        batch_size (int): without `input_context`, the rows of each yielded batch. With
            `input_context`, the GLOBAL batch: each yielded batch is the per-replica batch
            `input_context.get_per_replica_batch_size(batch_size)`; it must divide evenly.
        bi_data (bool): the second half of each per-replica batch reads the same ranges as the
            first half, backward (needs an even per-replica batch).
        seed: int; with the epoch, row and step it seeds every random choice.
        input_context: a `tf.distribute.InputContext` (from
            `strategy.distribute_datasets_from_function`); None for one replica.
        num_epochs (int | None): passes over the data; None repeats forever.
        sentencepiece_model: path of the SentencePiece model, so spans cover whole words;
            "auto" uses the manifest's vocabulary file when readable; None counts spans in
            tokens.
        reverse_block_tokens (int): tokens read at once by a backward row (memory per backward row).
        first_step: start at this (per-replica) step, counted from the start of epoch 0, as
            if that many batches per local replica had been read, without reading them:
            each row opens its range at the step's position. For resuming a run.
        mask_alpha: a span of n words sits in a group of `mask_alpha * n` words, so spans
            cover about one word in `mask_alpha` (the original's `mask_alpha`, 6 with 85 of
            512 tokens predicted). Targets that the spans leave over are single random
            tokens, so keep `mask_alpha` near `sequence_length / num_predict` for whole-word
            targets.
        max_span: longest span in words; lengths 1..max_span are drawn with p(n)
            proportional to 1/n (the original's `max_num_tokens`, 5).
        whole_word_targets: predict whole spans only, never a span cut at the goal or a
            single piece topped up; `num_predict` is then a cap and `mask_alpha` sets the
            share of predicted words (the original: False, exactly `num_predict` targets).
        spans_in_reading_order: the tokens of each masked span take their steps of the
            factorization order in reading order (`plm_sampling.span_reading_order`): a word's
            first piece is predicted seeing none of the word, each later piece the ones before
            it, as left-to-right scoring and generation read them. The spans' own order stays
            random (the original: False, every order of the tokens).

    Returns:
        A `tf.data.Dataset` of dicts, B the per-replica (or only) batch:
        `token_ids` int32 `[B, L]`, `segment_ids` int32 `[B, L]`, `padding_mask` int32
        `[B, L]` (all 1: pretraining examples are never padded), `perm_mask` float32
        `[B, L, L]` (1 = position i may not attend to j), `target_mapping` float32
        `[B, P, L]`, `target_ids` int32 `[B, P]`, `target_mask` float32 `[B, P]`.

    Raises:
        RecordsError: missing files or manifest, inconsistent manifest, too little data.
        ValueError: a missing or non-int size, or inconsistent sizes (batch not
            divisible, perm_size, ...), naming the argument
            (`xlnet_tf.data.check_pretraining_sizes.check_pretraining_sizes`).

    Example:
        >>> from xlnet_tf.data import pretraining_dataset
        >>> ds = pretraining_dataset("records/pretrain-*.tfrecord", sequence_length=512,
        ...     reuse_length=256, num_predict=85, perm_size=256, batch_size=16,
        ...     bi_data=True, seed=1)
        >>> batch = next(iter(ds))  # batch["perm_mask"].shape == (16, 512, 512)
    """
    # Arguments first, so a wrong one is named before any file is opened.
    check_pretraining_sizes(sequence_length=sequence_length, reuse_length=reuse_length,
                            num_predict=num_predict, perm_size=perm_size, batch_size=batch_size,
                            bi_data=bi_data if input_context is None else False)
    for name, value in (("seed", seed), ("first_step", first_step), ("mask_alpha", mask_alpha),
                        ("max_span", max_span)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}.")
    if num_epochs is not None and (isinstance(num_epochs, bool) or not isinstance(
            num_epochs, (int, np.integer)) or num_epochs < 1):
        raise ValueError(f"num_epochs must be None (repeat forever) or an int >= 1, got {num_epochs!r}.")
    for name, value in (("whole_word_targets", whole_word_targets),
                        ("spans_in_reading_order", spans_in_reading_order)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool, got {type(value).__name__} {value!r}.")
    records = PretrainingRecords(file_pattern)
    layout = _Layout(records, sequence_length=sequence_length, reuse_length=reuse_length,
                     num_predict=num_predict, perm_size=perm_size, batch_size=batch_size,
                     bi_data=bi_data, input_context=input_context)
    word_start = _load_word_start(records, sentencepiece_model)
    if word_start is not None and records.vocabulary_size and len(word_start) != records.vocabulary_size:
        raise RecordsError(f"sentencepiece_model has {len(word_start)} pieces but the records' "
                           f"vocabulary has {records.vocabulary_size}.")
    chunk_length = max(s.chunk_length for s in records.shards)
    reverse_block_records = max(1, reverse_block_tokens // chunk_length)

    steps = layout.steps_per_epoch
    if first_step < 0:
        raise ValueError(f"first_step must be >= 0, got {first_step}.")
    if mask_alpha < 1:
        raise ValueError(f"mask_alpha must be >= 1 (one word in mask_alpha is masked), got {mask_alpha}.")
    if max_span < 1:
        raise ValueError(f"max_span must be >= 1 (the longest span, in words), got {max_span}.")
    first_epoch, step_in_epoch = divmod(first_step, steps)
    if num_epochs is not None and first_epoch >= num_epochs:
        raise ValueError(f"first_step={first_step} is past the end of {num_epochs} epoch(s) of "
                         f"{steps} steps.")
    table, stream_start, stream_count = _piece_table(records, layout, reverse_block_records,
                                                     step_in_epoch)
    row_ids = tf.constant([r[0] for r in layout.rows], tf.int64)
    row_reverse = tf.constant([r[2] for r in layout.rows], tf.bool)

    def pairs(k):
        main, other = (_windows(_stream(table, stream_start[k + i], stream_count[k + i],
                                        reverse_block_records), layout.window, layout.advance)
                       for i in (0, 1))
        return tf.data.Dataset.zip(main, other)

    @_plain
    def row_dataset(r):
        # The rest of the first epoch, then whole epochs.
        row = pairs(4 * r + 2).take(steps - step_in_epoch)
        more = None if num_epochs is None else num_epochs - first_epoch - 1
        if more != 0:
            row = row.concatenate(pairs(4 * r).take(steps).repeat(more))
        row = row.enumerate(start=first_step)

        @_plain
        def label(count, pair):
            (tokens, sentences), (other_tokens, other_sentences) = pair
            return {"tokens": tokens, "sentences": sentences, "other_tokens": other_tokens,
                    "other_sentences": other_sentences, "epoch": count // steps,
                    "step": count % steps, "row": row_ids[r], "reverse": row_reverse[r]}

        return row.map(label)

    # Round robin over equally long rows: row after row, step after step.
    examples = tf.data.Dataset.range(len(layout.rows)).interleave(
        row_dataset, cycle_length=len(layout.rows), block_length=1)
    make = _make_example_fn(layout, num_predict=num_predict, perm_size=perm_size, seed=int(seed),
                            special_ids=records.special_ids, word_start=word_start,
                            mask_alpha=int(mask_alpha), max_span=int(max_span),
                            whole_word_targets=bool(whole_word_targets),
                            spans_in_reading_order=bool(spans_in_reading_order))
    dataset = examples.map(make, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.batch(layout.per_replica, drop_remainder=True)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
