"""`dropped_attention`: the op-by-op softmax, dropout and value product, with a lighter gradient."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.layers.dropped_attention import dropped_attention


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(2, 3, 5, 7)).astype("float32") * 3
    scores[:, :, :, 5:] = -1e30  # masked keys, as RelativeAttention adds them
    keep = rng.random((2, 3, 5, 7)) > 0.3
    values = rng.normal(size=(2, 3, 7, 4)).astype("float32")
    upstream = rng.normal(size=(2, 3, 5, 4)).astype("float32")
    return tf.constant(scores), tf.constant(keep), tf.constant(values), tf.constant(upstream)


def _op_by_op(scores, keep, values):
    probabilities = tf.nn.softmax(scores, axis=-1)
    return tf.einsum("bnij,bnjd->bnid", tf.where(keep, probabilities, 0.0), values)


def _with_gradients(function, scores, keep, values, upstream):
    with tf.GradientTape() as tape:
        tape.watch([scores, values])
        heads = function(scores, keep, values)
        total = tf.reduce_sum(heads * upstream)
    return (heads,) + tuple(tape.gradient(total, [scores, values]))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_outputs_and_gradients_are_the_op_by_op_ones(jit_compile):
    scores, keep, values, upstream = _inputs()
    ours = tf.function(lambda *a: _with_gradients(dropped_attention, *a), jit_compile=jit_compile)(
        scores, keep, values, upstream)
    reference = _with_gradients(_op_by_op, scores, keep, values, upstream)
    for name, a, b in zip(("heads", "scores gradient", "values gradient"), ours, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-6, err_msg=name)
    # Masked keys get no probability and no gradient; something was dropped.
    assert np.all(ours[1].numpy()[..., 5:] == 0)
    assert not np.all(keep.numpy())


def test_nothing_kept_gives_zero_output_and_gradient():
    scores, keep, values, upstream = _inputs(1)
    heads, scores_gradient, values_gradient = _with_gradients(
        dropped_attention, scores, tf.zeros_like(keep), values, upstream)
    assert not np.any(heads.numpy()) and not np.any(scores_gradient.numpy())
    assert not np.any(values_gradient.numpy())


def test_relative_attention_float32_training_matches_the_op_by_op_path(monkeypatch):
    # The float32 layer routes seeded training through dropped_attention; swapping in the
    # op-by-op reference must change neither the outputs nor any gradient.
    import xlnet_tf.layers.relative_attention as relative_attention

    rng = np.random.default_rng(3)
    layer = relative_attention.RelativeAttention(num_heads=2, head_dim=4, attention_dropout=0.4)
    h = tf.constant(rng.normal(size=(2, 5, 8)), tf.float32)
    memory = tf.constant(rng.normal(size=(2, 3, 8)), tf.float32)
    position = tf.constant(rng.normal(size=(1, 13, 8)), tf.float32)
    different = tf.constant(rng.random((2, 5, 8)) > 0.5)
    mask = tf.constant(rng.random((2, 5, 8)) > 0.7)
    biases = [tf.constant(rng.normal(size=(2, 4)), tf.float32) for _ in range(3)]
    segment_encoding = tf.constant(rng.normal(size=(2, 2, 4)), tf.float32)
    seed = tf.constant([4, 2], tf.int64)

    def run():
        with tf.GradientTape() as tape:
            tape.watch(h)
            out, _ = layer(h, position, different, mask, *biases, segment_encoding, memory=memory,
                           training=True, dropout_seed=seed)
            total = tf.reduce_sum(out * tf.range(1.0, 9.0))
        return [out, *tape.gradient(total, [h] + layer.trainable_variables)]

    ours = run()
    monkeypatch.setattr(relative_attention, "dropped_attention", _op_by_op)
    reference = run()
    for a, b in zip(ours, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
