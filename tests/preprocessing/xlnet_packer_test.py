import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker


def _truncate_seq_pair_reference(a, b, budget):
    # The original algorithm, literally: pop from the longer one, B on ties.
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def test_pair_layout_segments_and_left_padding():
    out = XLNetPacker(8)((tf.ragged.constant([[10, 11, 12]]), tf.ragged.constant([[20]])))
    assert out["token_ids"].numpy().tolist() == [[5, 10, 11, 12, 4, 20, 4, 3]]
    assert out["segment_ids"].numpy().tolist() == [[4, 0, 0, 0, 0, 1, 1, 2]]
    assert out["padding_mask"].numpy().tolist() == [[0, 1, 1, 1, 1, 1, 1, 1]]


def test_single_segment_and_unbatched_input():
    out = XLNetPacker(6)(tf.constant([10, 11, 12, 13, 14, 15]))
    assert out["token_ids"].numpy().tolist() == [10, 11, 12, 13, 4, 3]
    assert out["segment_ids"].numpy().tolist() == [0, 0, 0, 0, 0, 2]
    empty = XLNetPacker(4)(tf.ragged.constant([[]], dtype=tf.int32))
    assert empty["token_ids"].numpy().tolist() == [[5, 5, 4, 3]]


@pytest.mark.parametrize("length", [4, 7, 8, 12])
def test_longest_first_matches_the_original_truncation(length):
    rng = np.random.default_rng(length)
    firsts, seconds = [], []
    for _ in range(40):
        firsts.append(list(rng.integers(10, 30, rng.integers(0, 12))))
        seconds.append(list(rng.integers(30, 50, rng.integers(0, 12))))
    out = XLNetPacker(length)((tf.ragged.constant(firsts, dtype=tf.int32),
                               tf.ragged.constant(seconds, dtype=tf.int32)))
    for row, (a, b) in enumerate(zip(firsts, seconds)):
        a, b = _truncate_seq_pair_reference(a, b, length - 3)
        expected = [5] * (length - len(a) - len(b) - 3) + a + [4] + b + [4, 3]
        assert out["token_ids"][row].numpy().tolist() == expected


def test_keep_second_keeps_the_end_of_b_and_cuts_a():
    packer = XLNetPacker(9, truncate="keep_second", second_max_length=3)
    out = packer((tf.ragged.constant([[10, 11, 12, 13, 14]]), tf.ragged.constant([[20, 21, 22, 23]])))
    assert out["token_ids"].numpy().tolist() == [[10, 11, 12, 4, 21, 22, 23, 4, 3]]


def test_tf_data_map_gives_static_shapes_and_config_round_trips():
    packer = XLNetPacker(6)
    ds = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3, 4, 5]]))
    ds = ds.map(packer).batch(2)
    assert ds.element_spec["token_ids"].shape.as_list() == [None, 6]
    clone = XLNetPacker.from_config(packer.get_config())
    assert clone.get_config() == packer.get_config()


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="truncate"):
        XLNetPacker(8, truncate="middle")
    with pytest.raises(TypeError, match="integer ids"):
        XLNetPacker(8)(tf.constant(["a"]))
    with pytest.raises(ValueError, match="one or two"):
        XLNetPacker(8)([tf.constant([1])] * 3)


def test_python_lists_are_one_batch_and_tuples_are_segments():
    batch = XLNetPacker(6)([[10, 11], [12, 13, 14]])
    assert batch["token_ids"].numpy().tolist() == [[5, 5, 10, 11, 4, 3], [5, 12, 13, 14, 4, 3]]
    pair = XLNetPacker(6)(([[10]], [[20]]))
    assert pair["token_ids"].numpy().tolist() == [[5, 10, 4, 20, 4, 3]]
