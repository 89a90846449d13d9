"""XLNetBlock under bfloat16: the activation runs in float32, the block stays close to float32."""

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import run_layer_test, run_precision_test
from xlnet_tf.layers.xlnet_block import XLNetBlock, _in_float32


def block_inputs(seed=0, hidden=16, heads=2, head_dim=8, batch=2, length=5):
    rng = np.random.default_rng(seed)
    no_mask = np.zeros((batch, length, length), bool)
    bias = rng.normal(size=(heads, head_dim)).astype("float32") * 0.1
    return dict(content_stream=rng.normal(size=(batch, length, hidden)).astype("float32"),
                position_encoding=rng.normal(size=(1, 2 * length, hidden)).astype("float32"),
                segment_different=no_mask, content_mask=no_mask, content_bias=bias, positional_bias=bias,
                segment_bias=bias, segment_encoding=rng.normal(size=(2, heads, head_dim)).astype("float32") * 0.1)


def test_block_layer_contract():
    run_layer_test(XLNetBlock, dict(hidden_dim=8, num_heads=2, head_dim=4, intermediate_dim=16,
                                    activation="relu", dropout=0.1),
                   block_inputs(hidden=8, heads=2, head_dim=4), ((2, 5, 8), None))


def test_mixed_bfloat16_block_is_close_to_float32():
    kwargs = dict(hidden_dim=16, num_heads=2, head_dim=8, intermediate_dim=32, activation="gelu")
    run_precision_test(lambda dtype: XLNetBlock(**kwargs, dtype=dtype), block_inputs(1), tolerance=0.1)


def test_activation_of_bfloat16_is_computed_in_float32():
    x = tf.cast(tf.linspace(-6.0, 6.0, 101), tf.bfloat16)
    gelu = lambda t: tf.nn.gelu(t, approximate=False)  # noqa: E731
    out = _in_float32(gelu, x)
    assert out.dtype == tf.bfloat16
    expected = tf.cast(gelu(tf.cast(x, tf.float32)), tf.bfloat16)
    np.testing.assert_array_equal(out.numpy().astype("float32"), expected.numpy().astype("float32"))
    x32 = tf.cast(x, tf.float32)
    np.testing.assert_array_equal(_in_float32(gelu, x32).numpy(), gelu(x32).numpy())


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_bfloat16_block_is_close_to_float32(activation):
    kwargs = dict(hidden_dim=16, num_heads=2, head_dim=8, intermediate_dim=32, activation=activation)
    reference = XLNetBlock(**kwargs)
    block = XLNetBlock(**kwargs, dtype="bfloat16")
    rng = np.random.default_rng(0)
    h = rng.normal(size=(2, 5, 16)).astype("float32")
    pos = rng.normal(size=(1, 10, 16)).astype("float32")
    no_mask = np.zeros((2, 5, 5), bool)
    bias = rng.normal(size=(2, 8)).astype("float32") * 0.1
    segment = rng.normal(size=(2, 2, 8)).astype("float32") * 0.1
    expected, _ = reference(h, pos, no_mask, no_mask, bias, bias, bias, segment)
    block.build((None, None, 16))
    block.set_weights(reference.get_weights())
    cast = lambda a: tf.cast(a, tf.bfloat16)  # noqa: E731
    out, _ = block(cast(h), cast(pos), no_mask, no_mask, cast(bias), cast(bias), cast(bias), cast(segment))
    assert out.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), expected.numpy(), atol=0.1)


def _split_stacked_dropout(layer, inputs, lengths, training, seed=None, sites=(0,)):
    """The stacking-free reference: each stream's part dropped alone, as before stacking."""
    from xlnet_tf.layers.seeded_dropout import apply_dropout

    parts = tf.split(inputs, lengths, axis=1)
    return tf.concat([apply_dropout(layer, part, training, seed, site)
                      for part, site in zip(parts, sites)], axis=1)


@pytest.mark.parametrize("with_mapping", [False, True])
def test_stacked_streams_equal_each_stream_alone_with_dropout(monkeypatch, with_mapping):
    """Both streams run position-wise layers as one tensor; every number and mask stays the stream's own,
    and `stack_streams=False` (each stream apart) gives the same outputs and gradients."""
    import xlnet_tf.layers.relative_attention as attention_module
    import xlnet_tf.layers.xlnet_block as block_module

    block = XLNetBlock(hidden_dim=16, num_heads=2, head_dim=8, intermediate_dim=32, dropout=0.3,
                       attention_dropout=0.2)
    inputs = block_inputs(2)
    rng = np.random.default_rng(3)
    memory = rng.normal(size=(2, 3, 16)).astype("float32")
    keys = 8
    inputs.update(segment_different=rng.random((2, 5, keys)) < 0.5,
                  content_mask=rng.random((2, 5, keys)) < 0.2,
                  position_encoding=rng.normal(size=(1, 5 + keys, 16)).astype("float32"))
    query_mask = rng.random((2, 5, keys)) < 0.3
    if with_mapping:
        query = rng.normal(size=(2, 3, 16)).astype("float32")
        mapping = np.zeros((2, 3, 5), "float32")
        mapping[:, 0, 1] = mapping[:, 1, 4] = 1.0  # row 2 picks nothing (padding)
    else:
        query, mapping = rng.normal(size=(2, 5, 16)).astype("float32"), None
    seed = tf.constant([5, 6], tf.int64)
    variables = None

    def run(stack_streams=True):
        nonlocal variables
        with tf.GradientTape() as tape:
            content, query_out = block(**inputs, memory=memory, query_stream=query, query_mask=query_mask,
                                       target_mapping=mapping, training=True, dropout_seed=seed,
                                       stack_streams=stack_streams)
            loss = tf.reduce_sum(content * content) + tf.reduce_sum(tf.sin(query_out))
        variables = block.trainable_variables
        return content, query_out, tape.gradient(loss, variables)

    content, query_out, gradients = run()
    content_alone, none = block(**inputs, memory=memory, training=True, dropout_seed=seed)
    assert none is None
    # The same masks and numbers; a matmul over more rows may round in another order.
    np.testing.assert_allclose(content, content_alone, rtol=1e-5, atol=1e-6)
    # Run apart (the backbone's last layer), the streams get the same masks, numbers and gradients.
    apart_content, apart_query, apart_gradients = run(stack_streams=False)
    np.testing.assert_allclose(apart_content, content, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(apart_query, query_out, rtol=1e-5, atol=1e-6)
    for variable, got, want in zip(variables, apart_gradients, gradients):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=variable.path)

    monkeypatch.setattr(attention_module, "apply_stacked_dropout", _split_stacked_dropout)
    monkeypatch.setattr(block_module, "apply_stacked_dropout", _split_stacked_dropout)
    expected_content, expected_query, expected_gradients = run()
    np.testing.assert_array_equal(content, expected_content)
    np.testing.assert_array_equal(query_out, expected_query)
    for variable, got, want in zip(variables, gradients, expected_gradients):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=variable.path)
    # Dropout really ran: another seed gives another query output.
    other, other_query = block(**inputs, memory=memory, query_stream=query, query_mask=query_mask,
                               target_mapping=mapping, training=True,
                               dropout_seed=tf.constant([7, 8], tf.int64))
    assert not np.allclose(other_query, query_out)
