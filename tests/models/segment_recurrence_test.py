"""Recurrence memory across the segments of a long document: the backbone's memory mask and
`xlnet_tf.models.segment_recurrence` against a plain Python loop over segments."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import FIRST_PLAIN_ID, tiny_config, tiny_two_stream_inputs
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.segment_recurrence import (
    PADDING_SEGMENT_ID, last_segment_output, next_memory_padding_mask,
    split_into_segments)
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.preprocessing.xlnet_packer import SEGMENT_PAD

L = 4
PAD_VALUES = {"token_ids": 5, "segment_ids": PADDING_SEGMENT_ID, "padding_mask": 0}


def _backbone(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return XLNetBackbone(tiny_config(**overrides))


def _document(batch_size, num_segments, real_lengths, seed=0):
    """Left-padded documents `[B, S, L]`: `real_lengths[b]` real tokens, `<cls>` last, segments 0 / 2."""
    rng = np.random.default_rng(seed)
    total = num_segments * L
    token_ids = np.full((batch_size, total), 5, "int32")
    segment_ids = np.full((batch_size, total), PADDING_SEGMENT_ID, "int32")
    padding_mask = np.zeros((batch_size, total), "int32")
    for row, length in enumerate(real_lengths):
        token_ids[row, total - length:] = rng.integers(FIRST_PLAIN_ID, 40, length)
        token_ids[row, -1] = 3
        segment_ids[row, total - length:] = 0
        segment_ids[row, -1] = 2
        padding_mask[row, total - length:] = 1
    flat = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    return {k: v.reshape(batch_size, num_segments, L) for k, v in flat.items()}


def _with_padding_segments(features, count):
    """`features` `[B, S, L]` with `count` padding segments put in front."""
    batch_size = features["token_ids"].shape[0]
    return {k: np.concatenate([np.full((batch_size, count, L), PAD_VALUES[k], "int32"), v], axis=1)
            for k, v in features.items()}


def _python_loop(backbone, features, training=False, **call_kwargs):
    """The reference: the backbone called segment by segment, `mems` growing from none."""
    mems = None
    for index in range(features["token_ids"].shape[1]):
        segment = {k: v[:, index] for k, v in features.items()}
        if mems is not None:
            segment["mems"] = mems
        outputs = backbone(segment, training=training, **call_kwargs)
        mems = outputs.get("new_mems")
    return outputs["sequence_output"].numpy()


# ---------------------------------------------------------------- the backbone's memory mask
@pytest.mark.parametrize("attention_type", ["bi", "uni"])
def test_masked_memory_equals_the_shorter_memory_for_both_streams(attention_type):
    backbone = _backbone(attention_type=attention_type, memory_length=5)
    inputs = tiny_two_stream_inputs(backbone.config, batch_size=2, memory_length=5)
    # Row 0: its first 2 memory positions came from padding; row 1: all real.
    memory_mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], "int32")
    masked = backbone(dict(inputs, memory_padding_mask=memory_mask))
    for row, kept in ((0, 3), (1, 5)):
        shorter = {k: v[row:row + 1] for k, v in inputs.items()}
        shorter["mems"] = shorter["mems"][:, :, 5 - kept:]
        expected = backbone(shorter)
        for key in ("sequence_output", "query_output"):
            np.testing.assert_allclose(masked[key].numpy()[row:row + 1], expected[key].numpy(),
                                       atol=1e-5, err_msg=f"{key}, row {row}")
    # The closed positions matter: garbage there changes nothing, while open they would.
    noisy = dict(inputs, memory_padding_mask=memory_mask)
    noisy["mems"] = inputs["mems"].copy()
    noisy["mems"][0, :, :2] += 100.0
    np.testing.assert_allclose(backbone(noisy)["sequence_output"].numpy(),
                               masked["sequence_output"].numpy(), atol=1e-5)
    assert not np.allclose(backbone(dict(noisy, memory_padding_mask=np.ones((2, 5), "int32")))
                           ["sequence_output"].numpy()[0], masked["sequence_output"].numpy()[0])


def test_memory_padding_mask_is_validated():
    backbone = _backbone(memory_length=3)
    inputs = tiny_two_stream_inputs(backbone.config, batch_size=2)
    with pytest.raises(ValueError, match="only allowed with 'mems'"):
        backbone({k: v for k, v in inputs.items() if k != "mems"} | {
            "memory_padding_mask": np.ones((2, 3), "int32")})
    with pytest.raises(ValueError, match="'memory_padding_mask' has shape"):
        backbone(dict(inputs, memory_padding_mask=np.ones((2, 4), "int32")))
    with pytest.raises(ValueError, match="'memory_padding_mask' must have rank 2"):
        backbone(dict(inputs, memory_padding_mask=np.ones((2, 3, 1), "int32")))
    with pytest.raises(TypeError, match="'memory_padding_mask' must be int or bool"):
        backbone(dict(inputs, memory_padding_mask=np.ones((2, 3), "float32")))
    # bool works like int.
    np.testing.assert_array_equal(
        backbone(dict(inputs, memory_padding_mask=np.array([[0, 1, 1]] * 2, bool)))["sequence_output"],
        backbone(dict(inputs, memory_padding_mask=np.array([[0, 1, 1]] * 2, "int32")))["sequence_output"])


# ---------------------------------------------------------------- the small helpers
@pytest.mark.parametrize("reuse_length", [0, 2])
def test_next_memory_padding_mask_follows_new_mems(reuse_length):
    backbone = _backbone(memory_length=6, reuse_length=reuse_length)
    features = _document(2, 3, [7, 11], seed=3)
    mask, mems = None, None
    for index in range(3):
        segment = {k: v[:, index] for k, v in features.items()}
        outputs = backbone(dict(segment, **({} if mems is None else {"mems": mems})))
        mems = outputs["new_mems"]
        mask = next_memory_padding_mask(mask, segment["padding_mask"], 6, reuse_length)
        assert tuple(mask.shape) == (mems.shape[0], mems.shape[2])  # position for position
    # Golden: the last 6 positions of the cached parts (whole segments, or their first 2).
    cached = features["padding_mask"] if not reuse_length else features["padding_mask"][:, :, :2]
    expected = cached.reshape(2, -1)[:, -6:]
    np.testing.assert_array_equal(mask.numpy(), expected)
    with pytest.raises(ValueError, match="memory_length must be > 0"):
        next_memory_padding_mask(None, segment["padding_mask"], 0)


def test_split_into_segments_left_pads_to_whole_segments():
    assert PADDING_SEGMENT_ID == SEGMENT_PAD
    features = {"token_ids": np.array([[7, 11, 12, 13, 4, 3], [5, 5, 5, 21, 4, 3]], "int32"),
                "segment_ids": np.array([[0, 0, 0, 0, 0, 2], [4, 4, 4, 0, 0, 2]], "int32"),
                "padding_mask": np.array([[1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]], "int32"),
                "label": np.array([1, 0])}
    segments = split_into_segments(features, 4)
    assert segments["token_ids"].numpy().tolist() == [[[5, 5, 7, 11], [12, 13, 4, 3]],
                                                      [[5, 5, 5, 5], [5, 21, 4, 3]]]
    assert segments["segment_ids"].numpy().tolist() == [[[4, 4, 0, 0], [0, 0, 0, 2]],
                                                        [[4, 4, 4, 4], [4, 0, 0, 2]]]
    assert segments["padding_mask"].numpy().tolist() == [[[0, 0, 1, 1], [1, 1, 1, 1]],
                                                         [[0, 0, 0, 0], [0, 1, 1, 1]]]
    assert segments["label"] is features["label"]
    # A dynamic length in a graph, and unbatched features (a tf.data map before batching).
    spec = tf.TensorSpec([None, None], tf.int32)
    split = tf.function(lambda f: split_into_segments(f, 4),
                        input_signature=[{k: spec for k in ("token_ids", "segment_ids", "padding_mask")}])
    graph = split({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    np.testing.assert_array_equal(graph["token_ids"], segments["token_ids"])
    unbatched = split_into_segments({k: v[1] for k, v in features.items()}, 3)
    assert unbatched["token_ids"].numpy().tolist() == [[5, 5, 5], [21, 4, 3]]
    with pytest.raises(ValueError, match="'segment_ids' must be"):
        split_into_segments(dict(features, segment_ids=features["segment_ids"][None]), 4)


# ---------------------------------------------------------------- last_segment_output
@pytest.mark.parametrize("memory_length,reuse_length", [(3 * L, 0), (L, 2), (6, 0)])
def test_last_segment_output_equals_a_python_loop(memory_length, reuse_length):
    backbone = _backbone(memory_length=memory_length, reuse_length=reuse_length)
    features = _document(3, 4, [16, 16, 16], seed=1)
    expected = _python_loop(backbone, features)
    np.testing.assert_allclose(last_segment_output(backbone, features).numpy(), expected, atol=1e-5)
    # The memory is used: the output depends on the segment before the last.
    changed = {k: v.copy() for k, v in features.items()}
    changed["token_ids"][:, -2] = FIRST_PLAIN_ID
    assert not np.allclose(last_segment_output(backbone, changed).numpy(), expected, atol=1e-4)


def test_memory_off_reads_only_the_last_segment():
    backbone = _backbone(memory_length=0)
    features = _document(2, 3, [12, 5])
    last = {k: v[:, -1] for k, v in features.items()}
    # Not silently: the warning names the segments and the setting.
    with pytest.warns(UserWarning, match="3 segments but the backbone's memory_length is 0"):
        output = last_segment_output(backbone, features)
    np.testing.assert_array_equal(output.numpy(), backbone(last)["sequence_output"].numpy())


@pytest.mark.parametrize("reuse_length", [0, 3])
def test_padding_segments_change_nothing(reuse_length):
    backbone = _backbone(memory_length=2 * L, reuse_length=reuse_length)
    # 6 real tokens: one partly padded segment and one full one; then the same under S=5.
    short = _document(2, 2, [6, 8], seed=2)
    long = _with_padding_segments(short, 3)
    expected = last_segment_output(backbone, short).numpy()
    np.testing.assert_allclose(last_segment_output(backbone, long).numpy(), expected, atol=1e-5)
    # A batch whose rows have different numbers of padding segments.
    mixed = _document(2, 5, [6, 19], seed=2)
    mixed = {k: v.copy() for k, v in mixed.items()}
    for key in mixed:
        mixed[key][0] = long[key][0]
    np.testing.assert_allclose(last_segment_output(backbone, mixed).numpy()[0], expected[0], atol=1e-5)
    # One segment under S=4 is the single window.
    window = _document(2, 1, [3, 4], seed=5)
    padded = _with_padding_segments(window, 3)
    np.testing.assert_allclose(last_segment_output(backbone, padded).numpy(),
                               backbone({k: v[:, 0] for k, v in window.items()})["sequence_output"],
                               atol=1e-5)


@pytest.mark.slow
def test_xla_and_a_dynamic_number_of_segments_give_the_same_output():
    backbone = _backbone(memory_length=2 * L)
    features = _document(2, 3, [10, 12], seed=4)
    expected = last_segment_output(backbone, features).numpy()
    spec = {k: tf.TensorSpec([None, None, L], tf.int32) for k in features}
    dynamic = tf.function(lambda f: last_segment_output(backbone, f), input_signature=[spec])
    np.testing.assert_allclose(dynamic(features).numpy(), expected, atol=1e-5)
    compiled = tf.function(lambda f: last_segment_output(backbone, f), jit_compile=True)
    np.testing.assert_allclose(compiled(features).numpy(), expected, atol=1e-5)


def test_runs_per_replica_under_mirrored_strategy(two_cpu_devices):
    strategy = tf.distribute.MirroredStrategy(two_cpu_devices)
    with strategy.scope():
        backbone = _backbone(memory_length=2 * L)
    features = _document(4, 3, [10, 12, 3, 9], seed=6)
    expected = last_segment_output(backbone, features).numpy()
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(features).batch(4))

    @tf.function
    def run(batch):
        return strategy.run(lambda f: last_segment_output(backbone, f), args=(batch,))

    per_replica = run(next(iter(dataset)))
    outputs = np.concatenate([t.numpy() for t in strategy.experimental_local_results(per_replica)])
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_gradient_stops_at_the_memory():
    backbone = _backbone(memory_length=2 * L)
    features = _document(1, 3, [12], seed=7)
    features["token_ids"][0, 0] = [30, 31, 32, 33]  # ids only the first segment holds
    features["token_ids"][0, 1:, :][features["token_ids"][0, 1:, :] >= 30] = 20
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(last_segment_output(backbone, features, training=True) ** 2)
    gradient = tape.gradient(loss, backbone.token_embedding.embeddings)
    gradient = tf.convert_to_tensor(gradient).numpy()
    assert np.abs(gradient[30:34]).max() == 0.0  # first segment: read through the stopped memory only
    assert np.abs(gradient[features["token_ids"][0, -1]]).max() > 0.0


def test_dropout_masks_follow_the_seed_per_segment():
    backbone = _backbone(memory_length=2 * L, dropout=0.3, attention_dropout=0.1)
    features = _document(2, 3, [12, 9], seed=8)
    seed = tf.constant([4, 9], tf.int64)
    first = last_segment_output(backbone, features, training=True, dropout_seed=seed).numpy()
    again = last_segment_output(backbone, features, training=True, dropout_seed=seed).numpy()
    np.testing.assert_array_equal(first, again)
    other = last_segment_output(backbone, features, training=True,
                                dropout_seed=tf.constant([4, 10], tf.int64)).numpy()
    assert not np.allclose(first, other)
    # The contract: segment i draws from sub_seed(seed, i), starting from a closed zero memory.
    mems = np.zeros((2, 2, 2 * L, 8), "float32")
    memory_mask = np.zeros((2, 2 * L), "int32")
    for index in range(3):
        segment = {k: v[:, index] for k, v in features.items()}
        outputs = backbone(dict(segment, mems=mems, memory_padding_mask=memory_mask), training=True,
                           dropout_seed=seeded_dropout.sub_seed(seed, index))
        mems = outputs["new_mems"]
        memory_mask = next_memory_padding_mask(memory_mask, segment["padding_mask"], 2 * L)
    np.testing.assert_allclose(first, outputs["sequence_output"].numpy(), atol=1e-5)


def test_bad_features_name_the_problem():
    backbone = _backbone(memory_length=L)
    features = _document(1, 2, [5])
    with pytest.raises(ValueError, match=r"'token_ids' must be \[batch, segments, length\]"):
        last_segment_output(backbone, dict(features, token_ids=features["token_ids"][:, 0]))
    with pytest.raises(ValueError, match="lack"):
        last_segment_output(backbone, {"token_ids": features["token_ids"]})
