import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import (FIRST_PLAIN_ID, pretraining_features, run_layer_test, run_model_saving_test,
                           run_preset_test, tiny_config)
from xlnet_tf import XLNetBackbone, XLNetPretrainer

V, B, L, P = 30, 4, 8, 3


def tiny_pretrainer(**overrides):
    return XLNetPretrainer(XLNetBackbone(tiny_config(**dict(dict(vocabulary_size=V), **overrides))))


def batch(seed=0):
    rng = np.random.default_rng(seed)
    target_positions = np.stack([rng.choice(L, P, replace=False) for _ in range(B)])
    token_ids = rng.integers(FIRST_PLAIN_ID, V, (B, L))
    perm_mask = np.zeros((B, L, L), "float32")
    for b in range(B):
        perm_mask[b][:, target_positions[b]] = 1.0  # nobody sees the targets
    return pretraining_features(token_ids, target_positions, perm_mask,
                                np.array([[1, 1, 1]] * (B - 1) + [[1, 1, 0]], "float32"))


def test_layer_contract():
    layer = run_layer_test(XLNetPretrainer, {"backbone": XLNetBackbone(tiny_config(vocabulary_size=V))}, batch(5),
                           {"sequence_output": (B, L, 8), "query_output": (B, P, 8), "logits": (B, P, V)},
                           output_dtype={"logits": "float32"})  # the loss reads float32 logits
    assert layer.backbone.config.vocabulary_size == V


def test_logits_are_tied_to_the_word_embedding():
    model = tiny_pretrainer()
    model.lm_bias.assign(np.linspace(-1, 1, V).astype("float32"))
    data = batch()
    outputs = model(data)
    embeddings = np.asarray(model.backbone.token_embedding.embeddings)
    expected = np.einsum("bph,vh->bpv", np.asarray(outputs["query_output"]), embeddings)
    expected += np.asarray(model.lm_bias)
    np.testing.assert_allclose(np.asarray(outputs["logits"]), expected, atol=1e-5)
    content = model({k: v for k, v in data.items() if k not in ("perm_mask", "target_mapping")})
    assert content["logits"].shape == (B, L, V)


def test_loss_is_masked_mean_cross_entropy():
    model = tiny_pretrainer()
    data = batch(1)
    outputs = model(data)
    logits = np.asarray(outputs["logits"], "float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, data["target_ids"][..., None], -1)[..., 0]
    expected = (nll * data["target_mask"]).sum() / data["target_mask"].sum()
    loss = model.compute_loss(x=data, y=None, y_pred=outputs)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_train_step_compiles_with_xla_at_static_shapes():
    import tensorflow as tf

    model = tiny_pretrainer(memory_length=4, reuse_length=4, bi_data=True)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    data = batch(2)
    dataset = tf.data.Dataset.from_tensors(data).repeat(20)
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(dataset, epochs=1, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert model.jit_compile
    changed = [not np.allclose(a, np.asarray(b)) for a, b in zip(before, model.trainable_weights)]
    assert all(changed)  # every weight, lm_bias and mask_embedding included, gets a gradient
    first = float(model.compute_loss(x=data, y=None, y_pred=model(data)))
    assert first < 3.0  # fell well below log(V) = 3.4 on a repeated batch


def test_preset_round_trip_keeps_lm_bias(tmp_path):
    model = tiny_pretrainer()
    model.lm_bias.assign(np.arange(V, dtype="float32") / V)
    preset = os.path.join(tmp_path, "preset")
    restored = run_preset_test(XLNetPretrainer, preset, batch(3), model=model, atol=1e-5)
    np.testing.assert_allclose(np.asarray(restored.lm_bias), np.asarray(model.lm_bias))
    backbone_only = XLNetBackbone.from_preset(preset)
    assert backbone_only.config == model.backbone.config


def test_keras_file_round_trip():
    model = tiny_pretrainer()
    run_model_saving_test(model, batch(4))


def test_unknown_input_key_is_named():
    model = tiny_pretrainer()
    with pytest.raises(ValueError, match="unknown input key.*labels"):
        model(dict(batch(), labels=np.zeros((B,), "int32")))


def test_static_batch_size_mismatch_is_an_error_not_a_silent_reshape():
    import tensorflow as tf

    model = tiny_pretrainer()
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model.set_static_batch_size(B + 2)
    data = batch(3)
    # A static batch dimension is checked when the step is traced, by name.
    with pytest.raises(ValueError, match=r"'token_ids' has per-replica batch size 4.*set up for 6"):
        model.train_on_batch(data)
    # An unknown one (as inside steps_per_execution loops) is checked when the step runs:
    # by EnsureShape, or under XLA by the first operation that meets the other size.
    signature = {k: tf.TensorSpec((None,) + v.shape[1:], v.dtype) for k, v in data.items()}
    tensors = {k: tf.constant(v) for k, v in data.items()}
    for jit_compile, message in ((False, r"not compatible with expected shape \[6,"),
                                 (True, r"\[4,.*\[6,|\[6,.*\[4,")):
        model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit_compile)
        step = tf.function(model.train_step, input_signature=[signature], jit_compile=jit_compile)
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            step(tensors)
    model.set_static_batch_size(B)
    step = tf.function(model.train_step, input_signature=[signature], jit_compile=True)
    assert np.isfinite(float(step(tensors)["loss"]))


def test_train_step_update_equals_the_plain_tape_gradient():
    # train_step forms the tied embedding's gradient itself (the head's share last, the
    # lookup's rows added in place); the update must be the one of a plain tape gradient.
    from xlnet_tf.layers.seeded_dropout import training_dropout_seed

    data = batch(2)

    def compiled(seed_weights=None):
        model = tiny_pretrainer(memory_length=0, dropout=0.1, attention_dropout=0.1)
        if seed_weights is not None:
            model.set_weights(seed_weights)
        # SGD with rate 1: the update is the gradient (Adam's first step would amplify rounding
        # differences of near-zero gradients to a full step).
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0))
        return model

    ours = compiled()
    start = ours.get_weights()
    plain = compiled(start)
    plain.backbone.dropout_run_seed = ours.backbone.dropout_run_seed  # the same masks
    ours.train_on_batch(data)

    plain.optimizer.build(plain.trainable_variables)
    with tf.GradientTape() as tape:
        outputs = plain(data, training=True, dropout_seed=training_dropout_seed(plain, True))
        per_token, _, mask = plain._masked_sums(data["target_ids"], data["target_mask"], outputs["logits"])
        loss = tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)
    gradients = tape.gradient(loss, plain.trainable_variables)
    plain.optimizer.apply(gradients, plain.trainable_variables)

    moved = 0
    for a, b, before in zip(ours.get_weights(), plain.get_weights(), start):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        moved += not np.allclose(a, before, atol=1e-4)
    assert moved > 10


@pytest.mark.parametrize("lookup", ["indexed_slices", "dense", "none"])
def test_tied_embedding_gradient_sums_both_shares(lookup):
    from xlnet_tf.models.xlnet_pretrainer import _tied_embedding_gradient

    rng = np.random.default_rng(0)
    logits_gradient = rng.normal(size=(2, 3, V)).astype("float32")
    head_input = rng.normal(size=(2, 3, 8)).astype("float32")
    rows = rng.normal(size=(4, 8)).astype("float32")
    ids = np.array([5, 1, 5, 7])  # a repeated id: its rows add up
    expected = np.einsum("bpv,bph->vh", logits_gradient, head_input)
    lookup_gradient = None
    if lookup != "none":
        dense = np.zeros((V, 8), "float32")
        np.add.at(dense, ids, rows)
        expected = expected + dense
        lookup_gradient = (tf.IndexedSlices(tf.constant(rows), tf.constant(ids), tf.constant([V, 8]))
                           if lookup == "indexed_slices" else tf.constant(dense))
    result = _tied_embedding_gradient(lookup_gradient, tf.constant(logits_gradient), tf.constant(head_input),
                                      [tf.ones(3), None])
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_frozen_word_embedding_stays_put_and_the_rest_trains():
    # With the embedding frozen, train_step leaves the tied gradient to the tape (no table to form).
    model = tiny_pretrainer(memory_length=0)
    model.backbone.token_embedding.trainable = False
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0))
    table = np.asarray(model.backbone.token_embedding.embeddings).copy()
    bias = np.asarray(model.lm_bias).copy()
    model.train_on_batch(batch(3))
    np.testing.assert_array_equal(np.asarray(model.backbone.token_embedding.embeddings), table)
    assert not np.allclose(np.asarray(model.lm_bias), bias)
