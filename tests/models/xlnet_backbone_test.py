import collections
import functools
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.harness import run_layer_test, run_model_saving_test, run_precision_test, run_preset_test, tiny_inputs
from xlnet_tf import XLNetBackbone

V, B, L = 30, 4, 6


def tiny_config(**overrides):
    """The harness's tiny config with 3 layers (so a leak must cross a middle layer) and 30 pieces."""
    return harness.tiny_config(**dict(dict(vocabulary_size=V, num_layers=3), **overrides))


def make_inputs(seed=0, batch=B, length=L):
    return tiny_inputs(tiny_config(), batch, length, seed)


def permutation_inputs(order, seed=0):
    """perm_mask / target_mapping for one full factorization order (every position predicted)."""
    length = len(order)
    rank = np.empty(length, int)
    rank[np.asarray(order)] = np.arange(length)
    perm_mask = (rank[None, :] >= rank[:, None]).astype("float32")  # i may not see j at/after it
    inputs = make_inputs(seed, batch=1, length=length)
    inputs["perm_mask"] = perm_mask[None]
    inputs["target_mapping"] = np.eye(length, dtype="float32")[None]
    return inputs, rank


@pytest.fixture(scope="module")
def backbone():
    return XLNetBackbone(tiny_config())


def test_output_shapes(backbone):
    inputs = make_inputs()
    inputs["target_mapping"] = np.eye(L, dtype="float32")[None, :2].repeat(B, 0)
    outputs = backbone(inputs, output_hidden_states=True)
    assert outputs["sequence_output"].shape == (B, L, 8)
    assert outputs["query_output"].shape == (B, 2, 8)
    assert outputs["hidden_states"].shape == (B, 4, L, 8)
    assert outputs["query_hidden_states"].shape == (B, 4, 2, 8)
    assert "new_mems" not in outputs


def test_rows_do_not_depend_on_the_rest_of_the_batch(backbone):
    inputs = make_inputs(1)
    inputs["padding_mask"][2, :3] = 0
    together = np.asarray(backbone(inputs)["sequence_output"])
    for row in range(B):
        alone = backbone({k: v[row:row + 1] for k, v in inputs.items()})["sequence_output"]
        np.testing.assert_allclose(together[row], np.asarray(alone)[0], atol=1e-5)


def test_left_padding_does_not_change_real_tokens(backbone):
    inputs = make_inputs(2, batch=1)
    plain = np.asarray(backbone(inputs)["sequence_output"])[0]
    pad = 3
    padded = {
        "token_ids": np.concatenate([np.full((1, pad), 5, "int32"), inputs["token_ids"]], 1),
        "segment_ids": np.concatenate([np.full((1, pad), 4, "int32"), inputs["segment_ids"]], 1),
        "padding_mask": np.concatenate([np.zeros((1, pad), "int32"), inputs["padding_mask"]], 1),
    }
    padded_out = np.asarray(backbone(padded)["sequence_output"])[0, pad:]
    np.testing.assert_allclose(padded_out, plain, atol=1e-5)


@pytest.mark.parametrize("attention_type", ["bi", "uni"])
def test_no_leak_through_every_layer(attention_type):
    # Memory columns are always visible, as in pretraining; without any visible key, the first
    # position of the order would attend uniformly (the original's behaviour too).
    model = XLNetBackbone(tiny_config(attention_type=attention_type, memory_length=2,
                                      initializer_range=0.3))
    order = [3, 0, 5, 1, 4, 2]
    inputs, rank = permutation_inputs(order)
    inputs["mems"] = np.random.default_rng(1).normal(size=(1, 3, 2, 8)).astype("float32")
    base = model(inputs, output_hidden_states=True)
    for changed in range(L):
        modified = {k: v.copy() for k, v in inputs.items()}
        modified["token_ids"][0, changed] = (modified["token_ids"][0, changed] + 7) % V
        out = model(modified, output_hidden_states=True)
        content_diff = np.abs(np.asarray(out["hidden_states"]) - np.asarray(base["hidden_states"]))[0]
        query_diff = np.abs(np.asarray(out["query_hidden_states"]) -
                            np.asarray(base["query_hidden_states"]))[0]
        for position in range(L):
            if attention_type == "uni" and position < changed:
                continue  # uni also hides later sequence positions; checked separately below.
            if rank[changed] > rank[position]:
                # Content stream: a later token in the factorization order is invisible.
                assert content_diff[:, position].max() < 1e-5, (changed, position)
            if rank[changed] >= rank[position]:
                # Query stream: neither its own token nor any later one is visible.
                assert query_diff[:, position].max() < 1e-5, (changed, position)
        # Sanity: the change is visible somewhere (in its own content stream).
        assert content_diff[1:, changed].max() > 1e-4


def test_uni_attention_is_causal():
    model = XLNetBackbone(tiny_config(attention_type="uni"))
    inputs = make_inputs(3, batch=1)
    base = np.asarray(model(inputs, output_hidden_states=True)["hidden_states"])
    inputs["token_ids"][0, 4] = (inputs["token_ids"][0, 4] + 3) % V
    out = np.asarray(model(inputs, output_hidden_states=True)["hidden_states"])
    np.testing.assert_allclose(out[0, :, :4], base[0, :, :4], atol=1e-5)
    assert np.abs(out[0, 1:, 4:] - base[0, 1:, 4:]).max() > 1e-4


def test_memory_is_used_and_cached():
    config = tiny_config(memory_length=4, reuse_length=3)
    model = XLNetBackbone(config)
    first = make_inputs(4)
    out1 = model(first, output_hidden_states=True)
    mems = np.asarray(out1["new_mems"])
    assert mems.shape == (B, 3, 3, 8)  # min(reuse_length, memory_length) without earlier memory
    # Memory caches each layer's input: the first reuse_length positions.
    np.testing.assert_allclose(mems, np.asarray(out1["hidden_states"])[:, :3, :3], atol=1e-6)
    second = make_inputs(5)
    with_memory = model(dict(second, mems=mems))
    without_memory = model(second)
    # Recurrence that silently does nothing is a known bug elsewhere: memory must change outputs.
    assert np.abs(np.asarray(with_memory["sequence_output"]) -
                  np.asarray(without_memory["sequence_output"])).max() > 1e-3
    new_mems = np.asarray(with_memory["new_mems"])
    assert new_mems.shape == (B, 3, 4, 8)
    np.testing.assert_allclose(new_mems[:, :, :1], mems[:, :, 2:], atol=1e-6)  # oldest dropped


def test_memory_gradient_is_stopped():
    model = XLNetBackbone(tiny_config(memory_length=3))
    mems = tf.Variable(np.random.default_rng(0).normal(size=(B, 3, 3, 8)).astype("float32"))
    with tf.GradientTape() as tape:
        out = model(dict(make_inputs(6), mems=mems))
        loss = tf.reduce_sum(out["new_mems"])
    assert tape.gradient(loss, mems) is None


def test_bad_inputs_name_the_problem(backbone):
    good = make_inputs()
    with pytest.raises(ValueError, match="missing input.*padding_mask"):
        backbone({k: v for k, v in good.items() if k != "padding_mask"})
    with pytest.raises(ValueError, match="unknown input key.*input_ids"):
        backbone(dict(good, input_ids=good["token_ids"]))
    with pytest.raises(ValueError, match="'token_ids' must have rank 2"):
        backbone(dict(good, token_ids=good["token_ids"][0]))
    with pytest.raises(TypeError, match="'token_ids' must be an integer"):
        backbone(dict(good, token_ids=good["token_ids"].astype("float32")))
    with pytest.raises(TypeError, match="'perm_mask' must be a float"):
        backbone(dict(good, perm_mask=np.zeros((B, L, L), "int32")))
    with pytest.raises(ValueError, match=r"'perm_mask' has shape \(4, 6, 5\)"):
        backbone(dict(good, perm_mask=np.zeros((B, L, L - 1), "float32")))
    with pytest.raises(ValueError, match="'mems' has shape"):
        backbone(dict(good, mems=np.zeros((B, 2, 3, 8), "float32")))
    with pytest.raises(ValueError, match="'segment_ids' has shape"):
        backbone(dict(good, segment_ids=good["segment_ids"][:, :3]))
    with pytest.raises(TypeError, match="dict of inputs"):
        backbone(good["token_ids"])


def test_bi_data_rejects_odd_batch():
    model = XLNetBackbone(tiny_config(bi_data=True))
    with pytest.raises(ValueError, match="bi_data needs an even"):
        model(make_inputs(batch=3))


def test_bi_data_second_half_reads_backward():
    model = XLNetBackbone(tiny_config(bi_data=True, num_layers=1, initializer_range=0.3))
    inputs = make_inputs(7, batch=2)
    inputs = {k: np.concatenate([v[:1], v[:1]]) for k, v in inputs.items()}
    out = np.asarray(model(inputs)["sequence_output"])
    assert np.abs(out[0] - out[1]).max() > 1e-4  # same text, forward vs backward positions


def test_layer_contract():
    config = tiny_config(memory_length=2)
    inputs = dict(make_inputs(12), target_mapping=np.eye(L, dtype="float32")[None, :2].repeat(B, 0))
    layer = run_layer_test(XLNetBackbone, {"config": config}, inputs,
                           {"sequence_output": (B, L, 8), "query_output": (B, 2, 8), "new_mems": (B, 3, 2, 8)})
    assert XLNetBackbone.from_config(layer.get_config()).config == config


def test_get_config_and_keras_file_round_trip(backbone):
    clone = XLNetBackbone.from_config(backbone.get_config())
    assert clone.config == backbone.config
    restored = run_model_saving_test(backbone, make_inputs(8))
    assert restored.config == backbone.config


def test_preset_round_trip(tmp_path, backbone):
    preset = os.path.join(tmp_path, "preset")
    # keras-hub's layout (no vocabulary given: no tokenizer files).
    restored = run_preset_test(XLNetBackbone, preset, make_inputs(9), model=backbone,
                               expected_files=["config.json", "metadata.json", "model.weights.h5"])
    assert restored.config == backbone.config
    with_memory = XLNetBackbone.from_preset(preset, memory_length=5)
    assert with_memory.config.memory_length == 5
    with pytest.raises(ValueError, match="cannot override.*hidden_dim"):
        XLNetBackbone.from_preset(preset, hidden_dim=16)
    with pytest.raises(FileNotFoundError, match="no model.weights.h5"):
        os.remove(os.path.join(preset, "model.weights.h5"))
        XLNetBackbone.from_preset(preset)


def test_mixed_bfloat16_stays_close_to_float32():
    config = tiny_config(memory_length=3)
    inputs = make_inputs(10)
    inputs["padding_mask"][:, :2] = 0
    inputs["perm_mask"] = (np.random.default_rng(0).random((B, L, L)) > 0.5).astype("float32")
    inputs["target_mapping"] = np.eye(L, dtype="float32")[None, :3].repeat(B, 0)
    # Stated tolerance: bf16 keeps ~3 significant digits; outputs are layer-normalised (O(1)).
    expected, got = run_precision_test(lambda dtype: XLNetBackbone(config, dtype=dtype), inputs, tolerance=0.1)
    assert sorted(expected) == ["new_mems", "query_output", "sequence_output"]
    assert keras.backend.standardize_dtype(got["sequence_output"].dtype) == "bfloat16"


def test_float16_masks_do_not_overflow():
    model = XLNetBackbone(tiny_config(), dtype="mixed_float16")
    inputs = make_inputs(11)
    inputs["padding_mask"][:, :4] = 0
    out = np.asarray(keras.ops.cast(model(inputs)["sequence_output"], "float32"))
    assert np.isfinite(out).all()


def _feedforward_rows_on_path(*outputs):
    """`{layer: sorted row counts}` of the feed-forward matmuls that `outputs` of a traced graph depend on."""
    rows = collections.defaultdict(list)
    seen, pending = set(), [tensor.op for tensor in outputs]
    while pending:
        op = pending.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        pending.extend(tensor.op for tensor in op.inputs)
        pending.extend(op.control_inputs)
        # Keras' scopes carry call-count suffixes: block_1_1/feedforward_intermediate_3/...
        match = re.search(r"(block_\d+)(?:_\d+)?/feedforward_intermediate[_\d]*/.*MatMul$", op.name)
        if op.type == "MatMul" and match:
            rows[match.group(1)].append(op.inputs[0].shape[0])
    return {layer: sorted(counts) for layer, counts in rows.items()}


def test_pretraining_output_does_not_need_the_last_layers_content_stream(monkeypatch):
    """Earlier layers run both streams as one stacked tensor; the last runs them apart, so a step
    that reads only the query stream (the pretraining loss) prunes the last content feed-forward."""
    backbone = XLNetBackbone(tiny_config(num_layers=2))
    inputs = harness.tiny_two_stream_inputs(backbone.config, batch_size=2, sequence_length=6,
                                            num_predict=3)
    signature = {key: tf.TensorSpec(np.shape(value), tf.as_dtype(np.asarray(value).dtype))
                 for key, value in inputs.items()}
    graph = tf.function(lambda x: backbone(x)).get_concrete_function(signature).graph
    query_output = graph.structured_outputs["query_output"]
    sequence_output = graph.structured_outputs["sequence_output"]
    # Rows are batch x positions: 2 x (6 content + 3 query) stacked, 2 x 3 query, 2 x 6 content.
    assert _feedforward_rows_on_path(query_output) == {"block_0": [18], "block_1": [6]}
    assert _feedforward_rows_on_path(sequence_output) == {"block_0": [18], "block_1": [12]}
    # Running the last layer apart changes no number.
    stacked = dict(backbone(inputs))
    original_call = type(backbone.blocks[-1]).call
    stack_calls = []

    @functools.wraps(original_call)  # Keras reads the call signature
    def call_stacked(self, *args, **kwargs):
        stack_calls.append(kwargs["stack_streams"])
        return original_call(self, *args, **dict(kwargs, stack_streams=True))

    monkeypatch.setattr(type(backbone.blocks[-1]), "call", call_stacked)
    all_stacked = backbone(inputs)
    assert stack_calls == [True, False]
    for key in ("sequence_output", "query_output"):
        np.testing.assert_allclose(stacked[key], all_stacked[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_adams_first_step_moves_a_repeated_tokens_row_by_the_learning_rate():
    # The table's gradient reaches the optimizer as one dense [V, H] tensor (JAX's and PyTorch's), a token's
    # rows summed: Adam's first step then moves each coordinate of a used row by the learning rate. As
    # unsummed IndexedSlices rows, Adam would square the rows of token 9 (seen 3 times) apart.
    keras.utils.set_random_seed(0)
    model = XLNetBackbone(tiny_config())
    token_ids = np.array([[9, 9, 9, 12, 3]], "int32")
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
              "padding_mask": np.ones_like(token_ids)}
    table = model.token_embedding.embeddings
    with tf.GradientTape() as tape:
        sequence = model(inputs, training=True)["sequence_output"]  # [1, 5, 8]
        loss = tf.reduce_sum(sequence * np.random.default_rng(0).normal(size=(1, 5, 8)).astype("float32"))
    gradient = tape.gradient(loss, table.value)
    assert isinstance(gradient, tf.Tensor) and tuple(gradient.shape) == (V, 8), type(gradient)
    before = table.numpy().copy()
    keras.optimizers.Adam(learning_rate=1e-2).apply([gradient], [table])
    moved = np.abs(table.numpy() - before)
    np.testing.assert_allclose(moved[[3, 9, 12]], 1e-2, rtol=1e-3)
    assert moved[[0, 1, 2, 10]].max() == 0.0
