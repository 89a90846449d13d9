"""Inference shortcuts: the last layer at the read positions only, and cached position heads.

Both must be exact: `output_positions` equals the full content stream gathered at those positions
(with and without memory, under XLA, in the task heads), and `precomputed_position_heads` equals
projecting the positions in the call, for the cached length and for shorter blocks.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config, tiny_inputs
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_task import cls_positions, gather_positions

CONFIG = tiny_config(num_layers=3)


def _padded_inputs(batch=3, length=7, seed=0):
    inputs = tiny_inputs(CONFIG, batch, length, seed)
    inputs["padding_mask"][0, :3] = 0  # left padded
    inputs["padding_mask"][2, 5:] = 0  # right padded
    return inputs


def _gathered(sequence, positions):
    return np.take_along_axis(np.asarray(sequence), positions[:, :, None], axis=1)


@pytest.mark.parametrize("memory", [False, True])
def test_output_positions_equal_the_full_stream_gathered(memory):
    keras.utils.set_random_seed(1)
    backbone = XLNetBackbone(CONFIG.replace(memory_length=5 if memory else 0))
    inputs = _padded_inputs()
    if memory:
        rng = np.random.default_rng(3)
        inputs["mems"] = rng.normal(size=(3, 3, 5, 8)).astype("float32")
        inputs["memory_padding_mask"] = np.array([[1] * 5, [0, 0, 1, 1, 1], [1] * 5], "int32")
    positions = np.array([[6, 2], [0, 6], [4, 4]], "int32")
    full = backbone(inputs)
    part = backbone(inputs, output_positions=positions)
    assert tuple(part["sequence_output"].shape) == (3, 2, 8)
    np.testing.assert_allclose(part["sequence_output"], _gathered(full["sequence_output"], positions),
                               atol=1e-5)
    if memory:  # the memory is each layer's input: untouched by the last layer's shortcut
        np.testing.assert_array_equal(part["new_mems"], full["new_mems"])

    compiled = tf.function(lambda x, p: backbone(x, output_positions=p)["sequence_output"],
                           jit_compile=True)
    np.testing.assert_allclose(compiled(inputs, positions), part["sequence_output"], atol=1e-5)


def test_output_positions_gradients_equal_the_gathered_loss():
    keras.utils.set_random_seed(2)
    backbone = XLNetBackbone(CONFIG)
    inputs = _padded_inputs()
    positions = np.array([[6], [6], [4]], "int32")

    def gradients(use_positions):
        with tf.GradientTape() as tape:
            if use_positions:
                out = backbone(inputs, output_positions=positions)["sequence_output"][:, 0]
            else:
                out = gather_positions(backbone(inputs)["sequence_output"], positions[:, 0])
            loss = tf.reduce_sum(out * tf.range(1.0, 9.0))
        return tape.gradient(loss, backbone.trainable_variables)

    for got, want in zip(gradients(True), gradients(False)):
        if want is None:
            assert got is None
            continue
        np.testing.assert_allclose(tf.convert_to_tensor(got), tf.convert_to_tensor(want), rtol=1e-5, atol=1e-5)


def test_bad_output_positions_are_refused_by_name():
    backbone = XLNetBackbone(CONFIG)
    inputs = _padded_inputs()
    with pytest.raises(ValueError, match="output_positions and output_hidden_states"):
        backbone(inputs, output_positions=np.zeros((3, 1), "int32"), output_hidden_states=True)
    with pytest.raises(ValueError, match="output_positions must be an int tensor"):
        backbone(inputs, output_positions=np.zeros((3,), "int32"))
    with pytest.raises(ValueError, match="'output_positions' has shape"):
        backbone(inputs, output_positions=np.zeros((2, 1), "int32"))
    with pytest.raises(ValueError, match=r"output_positions must be in \[0, 7\).*got 7"):
        backbone(inputs, output_positions=np.array([[0], [7], [1]], "int32"))
    with pytest.raises(ValueError, match="got -1"):
        backbone(inputs, output_positions=np.array([[0], [1], [-1]], "int32"))


def test_classifier_and_multiple_choice_read_cls_as_before():
    keras.utils.set_random_seed(3)
    backbone = XLNetBackbone(CONFIG)
    classifier = XLNetClassifier(backbone, num_classes=3)
    inputs = _padded_inputs()
    inputs["token_ids"][0, -1] = 3  # <cls> last in the left-padded row, mid-row in the right-padded one
    inputs["token_ids"][2, 4] = 3
    index = cls_positions(inputs["token_ids"], inputs["padding_mask"]).numpy()
    assert index.tolist() == [6, 6, 4]
    summary = gather_positions(backbone(inputs)["sequence_output"], index)
    want = classifier.logits_dense(classifier.summary_projection(summary))
    np.testing.assert_allclose(classifier(inputs), want, atol=1e-5)

    choices = XLNetMultipleChoice(backbone)
    grouped = {k: v.reshape(1, 3, 7) for k, v in inputs.items()}  # [B=1, C=3, L]
    want = np.reshape(choices.score_dense(choices.summary_projection(summary)), (1, 3))
    np.testing.assert_allclose(choices(grouped), want, atol=1e-5)


def test_precomputed_position_heads_equal_projecting_them():
    keras.utils.set_random_seed(4)
    backbone = XLNetBackbone(CONFIG)
    inputs = _padded_inputs(length=7)
    full = backbone(inputs)["sequence_output"].numpy()
    shorter = {k: v[:, 3:] for k, v in inputs.items()}  # [B, 4]
    shorter_want = backbone(shorter)["sequence_output"].numpy()

    heads = backbone.project_positions(7)
    assert [tuple(h.shape) for h in heads] == [(1, 2, 14, 4)] * 3
    backbone.precomputed_position_heads = heads
    try:
        np.testing.assert_array_equal(backbone(inputs)["sequence_output"], full)
        np.testing.assert_array_equal(backbone(shorter)["sequence_output"], shorter_want)
        traced = tf.function(lambda x: backbone(x)["sequence_output"], input_signature=[
            {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}])
        np.testing.assert_array_equal(traced(shorter), shorter_want)  # the length is a tensor there
        with pytest.raises(ValueError, match=r"cover calls of up to 7 keys \(memory and tokens\); this call has 9"):
            backbone(tiny_inputs(CONFIG, 3, 9))
        # Calls over memory read their run of distances (memory + tokens ... -tokens + 1) from the cache too.
        rng = np.random.default_rng(0)
        with_memory = dict(inputs, mems=rng.normal(size=(3, 3, 2, 8)).astype("float32"))  # 2 + 7 keys
        with pytest.raises(ValueError, match="this call has 9"):
            backbone(with_memory)
        backbone.precomputed_position_heads = None
        want = backbone(with_memory)["sequence_output"].numpy()
        short_memory = dict(shorter, mems=with_memory["mems"])
        short_want = backbone(short_memory)["sequence_output"].numpy()
        with backbone.lend_position_heads(backbone.project_positions(9)):
            np.testing.assert_allclose(backbone(with_memory)["sequence_output"], want, atol=1e-6)
            np.testing.assert_allclose(backbone(short_memory)["sequence_output"], short_want, atol=1e-6)
            # Wrong heads would show (100x the tolerance above): the call reads the lent ones.
            wrong = [h * 100.0 + 1.0 for h in backbone.precomputed_position_heads]
            with backbone.lend_position_heads(wrong):
                assert np.abs(backbone(with_memory)["sequence_output"].numpy() - want).max() > 1e-4
        assert backbone.precomputed_position_heads is None
    finally:
        backbone.precomputed_position_heads = None


def test_project_positions_needs_a_fine_tuning_attention():
    with pytest.raises(ValueError, match="bi_data"):
        XLNetBackbone(CONFIG.replace(bi_data=True)).project_positions(4)
