"""Tests of the pretraining reader: PLM semantics, row continuity, sharding, errors."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.data.records_helper import counting_stream, write_records
from xlnet_tf.data import plm_sampling
from xlnet_tf.data.pretraining import pretraining_dataset, pretraining_steps_per_epoch
from xlnet_tf.data.pretraining_records import PretrainingRecords, RecordsError

SEP, CLS, EOD = 4, 3, 7
START = 1000  # token value = START + position in the global stream
SENTENCE = 3  # a sentence starts at every stream position that is a multiple of 3


def _settings(**overrides):
    settings = dict(sequence_length=16, reuse_length=8, num_predict=4, perm_size=4, batch_size=4,
                    bi_data=False, seed=7, sentencepiece_model=None)
    settings.update(overrides)
    return settings


@pytest.fixture(scope="module")
def records_dir(tmp_path_factory):
    """One counting stream of 1533 tokens, split over three shards of unequal size."""
    tokens, sentences = counting_stream(START, 1533, SENTENCE)
    cuts = [0, 600, 1011, 1533]
    streams = [(tokens[a:b], sentences[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    directory = str(tmp_path_factory.mktemp("records"))
    write_records(directory, streams, chunk_length=16)
    return directory


def _batches(dataset, count):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


# Building a dataset traces its functions (seconds on a busy machine), so tests share a few.
EPOCH_STEPS_8 = (1533 // 8 - 13) // 8 + 1  # steps per epoch at batch 8, seq 16, reuse 8


@pytest.fixture(scope="module")
def batches_8(records_dir):
    """Two whole epochs at batch 8, no bi_data."""
    return _batches(pretraining_dataset(records_dir, num_epochs=2, **_settings(batch_size=8)), 1000)


@pytest.fixture(scope="module")
def dataset_6(records_dir):
    return pretraining_dataset(records_dir, **_settings(batch_size=6))


@pytest.fixture(scope="module")
def bi_batches(records_dir):
    # Small backward blocks (4 records) handed on in chunks of 24 tokens: exercises reading
    # a range backward block by block and re-chunking a block.
    from xlnet_tf.data import pretraining

    saved, pretraining._SUB_CHUNK = pretraining._SUB_CHUNK, 24
    try:
        dataset = pretraining_dataset(records_dir, reverse_block_tokens=64,
                                      **_settings(bi_data=True))
    finally:
        pretraining._SUB_CHUNK = saved
    return _batches(dataset, 4)


# ---------------------------------------------------------------- hand-worked goldens


def test_factorization_masks_golden():
    # positions:        0   1   2    3   4   5
    tokens = tf.constant([10, 11, SEP, 12, 13, CLS])
    is_masked = tf.constant([False, True, True, False, True, False])  # masked <sep> stays context
    order = tf.constant([5, 2, 0, 4, 1, 3])
    perm_mask, is_target = plm_sampling.factorization_masks(tokens, is_masked, order,
                                                            sep_token_id=SEP, cls_token_id=CLS)
    # Targets: 1 (order 2) and 4 (order 1). Context rows are blocked from both targets; the
    # target at 4 comes first and sees no target (not even itself); the target at 1 sees 4.
    expected = np.array([
        [0, 1, 0, 0, 1, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 1, 0, 0, 1, 0],
        [0, 1, 0, 0, 1, 0],
        [0, 1, 0, 0, 1, 0],
        [0, 1, 0, 0, 1, 0],
    ], np.float32)
    np.testing.assert_array_equal(perm_mask.numpy(), expected)
    np.testing.assert_array_equal(is_target.numpy(), [False, True, False, False, True, False])


def test_pack_targets_golden():
    tokens = tf.constant([10, 11, 12, 13, 14, 15])
    is_target = tf.constant([False, True, False, False, True, False])
    packed = plm_sampling.pack_targets(tokens, is_target, 4)
    expected_mapping = np.zeros([4, 6], np.float32)
    expected_mapping[0, 1] = expected_mapping[1, 4] = 1
    np.testing.assert_array_equal(packed["target_mapping"].numpy(), expected_mapping)
    np.testing.assert_array_equal(packed["target_ids"].numpy(), [11, 14, 0, 0])
    np.testing.assert_array_equal(packed["target_mask"].numpy(), [1, 1, 0, 0])


def test_factorization_order_is_blockwise():
    seen = set()
    for s in range(20):
        order = plm_sampling.factorization_order(8, 4, tf.constant([s, 1])).numpy()
        # Each block is a permutation of its own steps: block 0 before block 1.
        assert sorted(order[:4]) == [0, 1, 2, 3] and sorted(order[4:]) == [4, 5, 6, 7]
        seen.add(tuple(order))
    assert len(seen) > 10


def test_span_mask_exact_count_and_reverse():
    tokens = tf.range(100, 148)
    for s in range(10):
        seed = tf.constant([s, 3])
        mask = plm_sampling.span_mask(tokens, 8, seed).numpy()
        assert mask.sum() == 8
        flipped = plm_sampling.span_mask(tf.reverse(tokens, [0]), 8, seed, reverse=True).numpy()
        np.testing.assert_array_equal(flipped, mask[::-1])


def test_span_mask_covers_whole_words():
    # Pieces >= 150 continue a word: 20 words of 3 tokens, [start, cont, cont].
    word_start = np.arange(200) < 150
    tokens = tf.constant(np.array([[100 + i, 150 + i, 160 + i] for i in range(20)]).reshape(-1))
    spans_seen = 0
    for s in range(10):
        seed = tf.constant([s, 4])
        # The spans span_mask draws: 20 words, 60 // 6 + 1 groups, the first half of its seed.
        begin, length, valid = plm_sampling.sample_spans(
            20, 60 // 6 + 1, tf.random.experimental.stateless_split(seed, 2)[0])
        mask = plm_sampling.span_mask(tokens, 30, seed, word_start=word_start).numpy()
        assert mask.sum() == 30
        kept_words = np.zeros(20, bool)
        for b, n, v in zip(begin.numpy(), length.numpy(), valid.numpy()):
            if v:
                kept_words[b:b + n] = True
        assert kept_words.sum() * 3 <= 30  # every span fits the goal, so all are kept
        spans_seen += kept_words.sum()
        # Each span covers all three tokens of each of its words.
        assert mask.reshape(20, 3)[kept_words].all()
        # Token-level spans draw the same count.
        token_mask = plm_sampling.span_mask(tokens, 30, seed).numpy()
        assert mask.sum() == token_mask.sum()
    assert spans_seen > 0


def _whole_word_share(mask_ratio, seeds=40, max_span=5):
    """Share of targets whose whole 3-token word is a target, 1/4 of 120 tokens predicted."""
    word_start = np.arange(200) < 150
    tokens = tf.constant(np.array([[100 + i, 150 + i, 160 + i] for i in range(40)]).reshape(-1))
    whole = total = 0
    for s in range(seeds):
        mask = plm_sampling.span_mask(tokens, 30, tf.constant([s, 9]), word_start=word_start,
                                      mask_ratio=mask_ratio, max_span=max_span).numpy().reshape(40, 3)
        whole += mask[mask.all(axis=1)].sum()
        total += mask.sum()
    return whole / total


def test_mask_alpha_near_length_over_predictions_gives_whole_word_targets():
    # With one word in 6 under spans, the rest of a quarter's targets are single pieces;
    # with one in 4 the spans supply nearly all of them, as whole words.
    matched, default = _whole_word_share(4), _whole_word_share(6)
    assert matched > 0.85
    assert default < 0.8
    assert matched - default > 0.15


def test_mask_alpha_reaches_the_reader(records_dir):
    first = _batches(pretraining_dataset(records_dir, **_settings()), 3)
    default = _batches(pretraining_dataset(records_dir, **_settings(mask_alpha=6)), 3)
    other = _batches(pretraining_dataset(records_dir, **_settings(mask_alpha=2)), 3)
    for a, b in zip(first, default):
        np.testing.assert_array_equal(a["target_mapping"], b["target_mapping"])
    assert any((a["target_mapping"] != c["target_mapping"]).any() for a, c in zip(first, other))
    with pytest.raises(ValueError, match="mask_alpha must be >= 1"):
        pretraining_dataset(records_dir, **_settings(mask_alpha=0))


def test_max_span_reaches_the_reader(records_dir):
    # Spans of one word (max_span 1) differ from the default 1..5, and the value is checked.
    default = _batches(pretraining_dataset(records_dir, **_settings()), 3)
    five = _batches(pretraining_dataset(records_dir, **_settings(max_span=5)), 3)
    one = _batches(pretraining_dataset(records_dir, **_settings(max_span=1)), 3)
    for a, b in zip(default, five):
        np.testing.assert_array_equal(a["target_mapping"], b["target_mapping"])
    assert any((a["target_mapping"] != c["target_mapping"]).any() for a, c in zip(default, one))
    with pytest.raises(ValueError, match="max_span must be >= 1"):
        pretraining_dataset(records_dir, **_settings(max_span=0))


def test_max_span_one_masks_single_words():
    # Spans of one word each, and (one word in 4 under spans, a quarter predicted) the
    # targets are still whole words.
    for s in range(20):
        _, length, _ = plm_sampling.sample_spans(40, 20, tf.constant([s, 3]), max_span=1, mask_ratio=4)
        assert set(length.numpy().tolist()) == {1}
    assert _whole_word_share(4, max_span=1) > 0.85


def test_whole_word_targets_never_cut_a_word_nor_top_up():
    # Words of 3 pieces, spans of one word covering 10 of the 40 words, the goal 28 tokens:
    # with whole words every target's word is a target entirely, at most 28 tokens; the
    # original rule fills exactly 28 by cutting the word that crosses the goal.
    word_start = np.arange(200) < 150
    tokens = tf.constant(np.array([[100 + i, 150 + i, 160 + i] for i in range(40)]).reshape(-1))
    cut_or_topped = 0
    for s in range(20):
        kwargs = {"word_start": word_start, "mask_ratio": 4, "max_span": 1}
        whole = plm_sampling.span_mask(tokens, 28, tf.constant([s, 9]), whole_words=True,
                                       **kwargs).numpy().reshape(40, 3)
        original = plm_sampling.span_mask(tokens, 28, tf.constant([s, 9]), **kwargs).numpy().reshape(40, 3)
        assert (whole.all(axis=1) | ~whole.any(axis=1)).all()
        assert 0 < whole.sum() <= 28 and original.sum() == 28
        # The whole words are the original's spans that fit, in order.
        assert (original[whole.all(axis=1)]).all()
        cut_or_topped += int((original.any(axis=1) & ~original.all(axis=1)).sum())
    assert cut_or_topped > 0


def test_whole_word_targets_reach_the_reader(records_dir):
    # Token-level spans (no vocabulary): spans of one token never cross the goal, so the
    # targets only lose the single tokens topped up: fewer targets, all within the cap.
    settings = _settings(num_predict=8, mask_alpha=4, max_span=1)
    default = _batches(pretraining_dataset(records_dir, **settings), 3)
    original = _batches(pretraining_dataset(records_dir, **settings, whole_word_targets=False), 3)
    whole = _batches(pretraining_dataset(records_dir, **settings, whole_word_targets=True), 3)
    for a, b in zip(default, original):
        np.testing.assert_array_equal(a["target_mapping"], b["target_mapping"])
    counts = [int(b["target_mask"].sum()) for b in whole]
    assert all(c <= 3 * 4 * 8 for c in counts) and sum(counts) < sum(int(b["target_mask"].sum()) for b in default)
    for w, d in zip(whole, default):
        # Every whole-word target is also a target of the original rule (same spans, same seeds).
        assert (w["target_mapping"].sum(1) <= d["target_mapping"].sum(1)).all()
    with pytest.raises(ValueError, match="whole_word_targets must be a bool, got int 1"):
        pretraining_dataset(records_dir, **settings, whole_word_targets=1)


def test_span_reading_order_golden():
    # positions:                 0  1  2  3 | 4  5  6  7   (blocks of 4)
    order = tf.constant([6, 2, 0, 3, 7, 1, 5, 4])
    is_masked = tf.constant([False, True, True, True, True, True, False, True])
    # Runs: 1-3 (steps 2, 0, 3 handed out in reading order), 4-5 (the block boundary cuts the
    # masked run 1-5), 7 alone; context positions 0 and 6 keep their steps.
    forward = plm_sampling.span_reading_order(order, is_masked, 4).numpy()
    np.testing.assert_array_equal(forward, [6, 0, 2, 3, 1, 7, 5, 4])
    # A reversed stream reads from the last position: the run's last position comes first.
    backward = plm_sampling.span_reading_order(order, is_masked, 4, reverse=True).numpy()
    np.testing.assert_array_equal(backward, [6, 3, 2, 0, 7, 1, 5, 4])


def test_span_reading_order_predicts_each_word_left_to_right():
    # Words of 3 pieces, whole-word spans: after reordering, each masked word's first piece
    # sees none of its word and each later piece exactly the pieces before it; the order stays
    # a permutation with the same blocks, and a reversed stream reads each word from its end.
    word_start = np.arange(200) < 150
    tokens = tf.constant(np.array([[100 + i, 150 + i, 160 + i] for i in range(16)]).reshape(-1))
    for s in range(10):
        is_masked = plm_sampling.span_mask(tokens, 12, tf.constant([s, 5]), word_start=word_start,
                                           mask_ratio=4, max_span=1, whole_words=True)
        order = plm_sampling.factorization_order(48, 24, tf.constant([s, 6]))
        for reverse in (False, True):
            ordered = plm_sampling.span_reading_order(order, is_masked, 24, reverse).numpy()
            assert sorted(ordered[:24]) == list(range(24)) and sorted(ordered[24:]) == list(range(24, 48))
            masked = is_masked.numpy()
            np.testing.assert_array_equal(ordered[~masked], order.numpy()[~masked])
            perm_mask, _ = plm_sampling.factorization_masks(tokens, is_masked, ordered, sep_token_id=SEP,
                                                            cls_token_id=CLS)
            sees = perm_mask.numpy() == 0
            for word in np.flatnonzero(masked.reshape(16, 3).all(axis=1)):
                pieces = np.arange(3 * word, 3 * word + 3)[::-1 if reverse else 1]
                for k, p in enumerate(pieces):
                    np.testing.assert_array_equal(sees[p, pieces], np.arange(3) < k)


def test_spans_in_reading_order_reach_the_reader(records_dir):
    # Same targets as the random order (same seeds), each masked run of tokens read left to right.
    settings = _settings(num_predict=8, mask_alpha=2, max_span=3)
    default = _batches(pretraining_dataset(records_dir, **settings), 3)
    ordered = _batches(pretraining_dataset(records_dir, **settings, spans_in_reading_order=True), 3)
    adjacent_pairs = 0
    for d, o in zip(default, ordered):
        np.testing.assert_array_equal(d["target_mapping"], o["target_mapping"])
        positions = o["target_mapping"].sum(1) > 0  # [B, L]
        sees = o["perm_mask"] == 0
        for b, i in zip(*np.nonzero(positions[:, :-1] & positions[:, 1:])):
            if (i + 1) % settings["perm_size"]:  # the same block
                assert sees[b, i + 1, i] and not sees[b, i, i + 1]
                adjacent_pairs += 1
    assert adjacent_pairs > 10
    with pytest.raises(ValueError, match="spans_in_reading_order must be a bool, got str 'yes'"):
        pretraining_dataset(records_dir, **settings, spans_in_reading_order="yes")


# ---------------------------------------------------------------- statistics


def test_span_lengths_follow_one_over_n():
    counts = np.zeros(6)
    covered = words = 0
    for s in range(200):
        begin, length, valid = plm_sampling.sample_spans(600, 101, tf.constant([s, 9]))
        length, valid = length.numpy(), valid.numpy()
        assert length.min() >= 1 and length.max() <= 5
        counts += np.bincount(length, minlength=6)
        covered += length[valid].sum()
        words += 600
    freq = counts[1:] / counts.sum()
    expected = (1 / np.arange(1, 6)) / (1 / np.arange(1, 6)).sum()
    np.testing.assert_allclose(freq, expected, atol=0.02)
    # One word in K=6 is covered, minus the partly filled last group.
    assert abs(covered / words - 1 / 6) < 0.01


def test_predicted_fraction_is_one_in_six(records_dir):
    settings = _settings(sequence_length=48, reuse_length=24, num_predict=8, perm_size=8,
                         batch_size=2)
    targets = 0
    batches = _batches(pretraining_dataset(records_dir, **settings), 15)
    for batch in batches:
        targets += batch["target_mask"].sum()
        # Masked <sep>/<cls> are dropped from targets, so at most num_predict per example.
        assert (batch["target_mask"].sum(axis=1) <= 8).all()
    fraction = targets / (len(batches) * 2 * 48)
    assert 0.14 < fraction <= 1 / 6 + 1e-6


# ---------------------------------------------------------------- semantics on real batches


def _check_semantics(batch, reuse, num_predict):
    length = batch["token_ids"].shape[1]
    for b in range(batch["token_ids"].shape[0]):
        tokens = batch["token_ids"][b]
        perm = batch["perm_mask"][b]
        mapping = batch["target_mapping"][b]
        is_target = mapping.sum(axis=0) > 0
        # target_mapping: one-hot rows in position order, then zero rows; masks agree.
        row_sums = mapping.sum(axis=1)
        assert set(np.unique(mapping)) <= {0.0, 1.0}
        np.testing.assert_array_equal(row_sums, batch["target_mask"][b])
        count = int(row_sums.sum())
        assert (row_sums[:count] == 1).all() and (row_sums[count:] == 0).all()
        positions = mapping[:count].argmax(axis=1)
        assert (np.diff(positions) > 0).all()
        np.testing.assert_array_equal(batch["target_ids"][b][:count], tokens[positions])
        assert (batch["target_ids"][b][count:] == 0).all()
        # Function tokens are context: never targets, and every position of their part sees them.
        is_function = (tokens == SEP) | (tokens == CLS)
        assert not (is_target & is_function).any()
        assert tokens[-1] == CLS and tokens[-2] == SEP and (tokens == SEP).sum() == 2
        for lo, hi in ((0, reuse), (reuse, length)):
            part = slice(lo, hi)
            p_perm = perm[part, part]
            p_target = is_target[part]
            # A target never sees itself.
            assert (np.diag(p_perm)[p_target] == 1).all()
            # Context sees all context and no target.
            context = ~p_target
            assert (p_perm[np.ix_(context, p_target)] == 1).all()
            assert (p_perm[:, context] == 0).all()
            # Targets form a strict order: of two targets exactly one sees the other.
            t = np.flatnonzero(p_target)
            sub = p_perm[np.ix_(t, t)]
            np.testing.assert_array_equal(sub + sub.T, 1 + np.eye(len(t)))
        # The reuse part never sees the new part; the new part sees all of the reuse part.
        assert (perm[:reuse, reuse:] == 1).all()
        assert (perm[reuse:, :reuse] == 0).all()
        assert (batch["padding_mask"][b] == 1).all()


def test_batch_semantics(bi_batches, batches_8):
    for batch in bi_batches + batches_8[:3]:
        _check_semantics(batch, reuse=8, num_predict=4)


def test_layout_segments_and_sentence_cut(batches_8):
    continuation = total = 0
    for batch in batches_8[:10]:
        for tokens, segments in zip(batch["token_ids"], batch["segment_ids"]):
            sep1, sep2 = np.flatnonzero(tokens == SEP)
            np.testing.assert_array_equal(segments[:sep1 + 1], 0)
            np.testing.assert_array_equal(segments[sep1 + 1:15], 1)
            assert segments[15] == 2 and sep2 == 14
            # Reuse part and A are one contiguous run of the stream.
            np.testing.assert_array_equal(np.diff(tokens[:sep1]), 1)
            # A ends at a sentence boundary (every test sentence is 3 tokens, so one is always in reach).
            assert (tokens[sep1 - 1] + 1 - START) % SENTENCE == 0
            total += 1
            continuation += tokens[sep1 + 1] == tokens[sep1 - 1] + 1
    assert 0.3 < continuation / total < 0.7


# ---------------------------------------------------------------- continuity and sharding


def _reuse_starts(batches):
    return np.stack([b["token_ids"][:, 0] for b in batches])  # [steps, rows]


@pytest.mark.parametrize("batch_size", [6, 8])
def test_rows_continue_across_batches(dataset_6, batches_8, batch_size):
    batches = _batches(dataset_6, 5) if batch_size == 6 else batches_8[:5]
    for batch in batches:
        # The whole reuse part is one contiguous piece of the stream.
        np.testing.assert_array_equal(np.diff(batch["token_ids"][:, :8], axis=1), 1)
    starts = _reuse_starts(batches)
    np.testing.assert_array_equal(np.diff(starts, axis=0), 8)
    # Rows read disjoint equal ranges of the one stream.
    range_length = 1533 // batch_size
    np.testing.assert_array_equal(starts[0], START + range_length * np.arange(batch_size))


def test_bi_data_rows_run_backward(bi_batches):
    batches = bi_batches
    starts = _reuse_starts(batches)
    np.testing.assert_array_equal(np.diff(starts[:, :2], axis=0), 8)
    np.testing.assert_array_equal(np.diff(starts[:, 2:], axis=0), -8)
    for batch in batches:
        np.testing.assert_array_equal(np.diff(batch["token_ids"][2:, :8], axis=1), -1)
    # Backward row i reads forward row i's range from its end.
    range_length = 1533 // 2
    np.testing.assert_array_equal(starts[0], [START, START + range_length,
                                              START + range_length - 1, START + 2 * range_length - 1])


def test_input_context_shards_match_one_pipeline(records_dir, batches_8):
    """Pipelines x local replicas reproduce exactly the rows of the single-pipeline batch."""
    whole = batches_8[:3]
    parts = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=4)
        dataset = pretraining_dataset(records_dir, **_settings(batch_size=8), input_context=context)
        assert dataset.element_spec["token_ids"].shape == (2, 16)
        parts.append(_batches(dataset, 6))  # 3 steps x 2 local replicas, in turn
    for step in range(3):
        rebuilt = {k: np.concatenate([parts[p][2 * step + r][k] for p in range(2) for r in range(2)])
                   for k in whole[step]}
        for key, value in whole[step].items():
            np.testing.assert_array_equal(rebuilt[key], value, err_msg=key)


@pytest.mark.subprocess
def test_mirrored_strategy_replicas_keep_their_rows(records_dir):
    """distribute_datasets_from_function on 2 logical CPUs: each replica's rows continue."""
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from xlnet_tf.data.pretraining import pretraining_dataset
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        def dataset_fn(context):
            return pretraining_dataset({records_dir!r}, sequence_length=16, reuse_length=8, num_predict=4,
                perm_size=4, batch_size=4, bi_data=True, seed=7, sentencepiece_model=None,
                input_context=context)
        dist = strategy.distribute_datasets_from_function(dataset_fn)
        starts = []
        for step, batch in zip(range(3), dist):
            local = strategy.experimental_local_results(batch["token_ids"])
            starts.append(np.concatenate([t.numpy()[:, 0] for t in local]))
        starts = np.stack(starts)
        rng = 1533 // 2
        np.testing.assert_array_equal(starts[0], [{START}, {START} + rng - 1, {START} + rng, {START} + 2 * rng - 1])
        np.testing.assert_array_equal(np.diff(starts, axis=0), [[8, -8, 8, -8]] * 2)
        print("OK")
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=root, env=dict(os.environ, PYTHONPATH=root), timeout=300)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]


def test_static_shapes(dataset_6):
    spec = dataset_6.element_spec
    expected = {"token_ids": (6, 16), "segment_ids": (6, 16), "padding_mask": (6, 16),
                "perm_mask": (6, 16, 16), "target_mapping": (6, 4, 16), "target_ids": (6, 4),
                "target_mask": (6, 4)}
    assert {k: tuple(v.shape) for k, v in spec.items()} == expected
    assert spec["perm_mask"].dtype == tf.float32 and spec["token_ids"].dtype == tf.int32


# ---------------------------------------------------------------- determinism and epochs


def test_same_seed_same_batches_other_seed_differs(records_dir, batches_8):
    first = batches_8[:3]
    again = _batches(pretraining_dataset(records_dir, **_settings(batch_size=8)), 3)
    other = _batches(pretraining_dataset(records_dir, **_settings(batch_size=8, seed=8)), 3)
    for a, b, c in zip(first, again, other):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_array_equal(a["token_ids"][:, :8], c["token_ids"][:, :8])
    assert any((a["perm_mask"] != c["perm_mask"]).any() for a, c in zip(first, other))


def test_new_epoch_resamples(records_dir, batches_8):
    steps = pretraining_steps_per_epoch(records_dir, sequence_length=16, reuse_length=8,
                                        batch_size=8, bi_data=False)
    assert steps == EPOCH_STEPS_8
    batches = batches_8
    assert len(batches) == 2 * steps  # num_epochs bounds the dataset
    epoch0, epoch1 = batches[0], batches[steps]
    np.testing.assert_array_equal(epoch0["token_ids"][:, :8], epoch1["token_ids"][:, :8])
    assert (epoch0["perm_mask"] != epoch1["perm_mask"]).any()
    assert (epoch0["target_mapping"] != epoch1["target_mapping"]).any()


# ---------------------------------------------------------------- errors


def test_corrupted_record_names_the_file(tmp_path):
    tokens, sentences = counting_stream(START, 400, SENTENCE)
    paths = write_records(str(tmp_path), [(tokens, sentences)], chunk_length=16)
    data = bytearray(open(paths[0], "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(paths[0], "wb").write(bytes(data))
    dataset = pretraining_dataset(str(tmp_path), **_settings(batch_size=2))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"pretrain-00000-of-00001\.tfrecord"):
        _batches(dataset, 30)


def test_truncated_file_names_the_file(tmp_path):
    tokens, sentences = counting_stream(START, 400, SENTENCE)
    paths = write_records(str(tmp_path), [(tokens, sentences)], chunk_length=16)
    data = open(paths[0], "rb").read()
    open(paths[0], "wb").write(data[: len(data) * 3 // 4])
    dataset = pretraining_dataset(str(tmp_path), **_settings(batch_size=1))
    with pytest.raises(tf.errors.InvalidArgumentError, match=str(tmp_path) + ".*corrupted or truncated"):
        _batches(dataset, 40)


def test_record_length_mismatch_names_the_file(tmp_path):
    tokens, sentences = counting_stream(START, 400, SENTENCE)
    write_records(str(tmp_path), [(tokens, sentences)], chunk_length=16)
    manifest_path = tmp_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["chunk_length"] = 20  # disagrees with the records
    manifest["shards"][0]["num_records"] = 20
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(tf.errors.InvalidArgumentError, match="pretrain-00000-of-00001"):
        _batches(pretraining_dataset(str(tmp_path), **_settings(batch_size=1)), 2)


def test_missing_manifest_and_no_match(tmp_path):
    tokens, sentences = counting_stream(START, 100, SENTENCE)
    write_records(str(tmp_path), [(tokens, sentences)], chunk_length=16, manifest=False)
    with pytest.raises(RecordsError, match="Missing .*manifest.json"):
        PretrainingRecords(str(tmp_path / "*.tfrecord"))
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(RecordsError, match=r"No pretraining record files match .*nothing-\*"):
        pretraining_dataset(pattern, **_settings())


def test_wrong_manifest_format(tmp_path):
    tokens, sentences = counting_stream(START, 100, SENTENCE)
    write_records(str(tmp_path), [(tokens, sentences)], chunk_length=16)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "something.else"}))
    with pytest.raises(RecordsError, match="format 'something.else'"):
        PretrainingRecords(str(tmp_path))


def test_bad_sizes(records_dir):
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=4)
    with pytest.raises(ValueError, match="global batch_size=6 does not divide evenly over 4"):
        pretraining_dataset(records_dir, **_settings(batch_size=6), input_context=context)
    with pytest.raises(ValueError, match="even per-replica batch"):
        pretraining_dataset(records_dir, **_settings(batch_size=3, bi_data=True))
    with pytest.raises(ValueError, match="perm_size=3 must divide"):
        pretraining_dataset(records_dir, **_settings(perm_size=3))
    with pytest.raises(RecordsError, match="too few"):
        pretraining_dataset(records_dir, **_settings(batch_size=200))


def test_first_step_resumes_without_reading_the_skipped_batches(records_dir, batches_8):
    first_step = EPOCH_STEPS_8 + 5  # inside the second epoch
    resumed = _batches(pretraining_dataset(records_dir, num_epochs=2, first_step=first_step,
                                           **_settings(batch_size=8)), 1000)
    assert len(resumed) == len(batches_8) - first_step
    for a, b in zip(resumed, batches_8[first_step:]):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_first_step_with_bi_data_and_replicas(records_dir):
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    # Global batch 8 over 2 replicas: each yields bi_batches' layout (4 rows, 2 backward).
    resumed = _batches(pretraining_dataset(records_dir, first_step=2, input_context=context,
                                           **_settings(batch_size=8, bi_data=True)), 2)
    whole = _batches(pretraining_dataset(records_dir, input_context=context,
                                         **_settings(batch_size=8, bi_data=True)), 6)
    for a, b in zip(resumed, whole[4:]):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_vocabulary_checksum_mismatch(records_dir, testdata_dir):
    model = os.path.join(testdata_dir, "tiny_spiece.model")
    with pytest.raises(RecordsError, match="not the vocabulary the records were built with"):
        pretraining_dataset(records_dir, **_settings(sentencepiece_model=model))
