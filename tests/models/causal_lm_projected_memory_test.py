"""`XLNetCausalLM`'s `cached` mode keeps projected keys and values: the old layer-input memory's logits, less work."""

import keras
import numpy as np
import pytest

from tests.harness import tiny_config
from xlnet_tf.layers.relative_attention import RelativeAttention
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM

PROMPTS = [[11, 12], [21, 22, 23, 24, 25], [31, 32, 33, 34]]  # Left-padded together: 3, 0 and 1 pads.
NEW_TOKENS = 6


def causal_lm(recompute_window, dtype=None):
    keras.utils.set_random_seed(5)
    # Large weights: attention far from uniform, so a wrong memory column would show.
    backbone = XLNetBackbone(tiny_config(initializer_range=0.5), dtype=dtype)
    model = XLNetCausalLM(backbone, mode="cached", recompute_window=recompute_window)
    model.lm_bias.assign(np.random.default_rng(0).normal(0, 1, model.lm_bias.shape))
    return model


def left_padded(prompts, new_tokens):
    width = max(len(p) for p in prompts) + new_tokens
    ids, mask = np.zeros((len(prompts), width), np.int32), np.zeros((len(prompts), width), np.int32)
    start = max(len(p) for p in prompts)
    for row, prompt in enumerate(prompts):
        ids[row, start - len(prompt):start] = prompt
        mask[row, start - len(prompt):start] = 1
    return ids, mask


def layer_input_logits(model, ids, mask, continuation):
    """Every step's logits with memory of layer inputs, projected again each step (through the backbone's `mems`).

    Independent of the loop's code: each column's layer inputs are kept by
    column number, from the prompt pass or from the last step that had the
    column in its window, and each step's memory is read from them.
    """
    backbone, window = model.backbone, model.recompute_window
    layers, batch, length = backbone.config.num_layers, ids.shape[0], ids.shape[1]
    start = int(mask.sum(axis=1).max())
    first = start - mask.sum(axis=1)
    prompt = backbone({"token_ids": ids, "segment_ids": np.zeros_like(ids),
                       "padding_mask": mask}, training=False, output_hidden_states=True)
    states = {c: np.asarray(prompt["hidden_states"])[:, :layers, c] for c in range(start - window)}
    ids = ids.copy()
    logits = []
    for step, token in enumerate(continuation.T):
        index = start + step
        memory_columns = np.arange(index - window - length, index - window)  # T slots, right-aligned
        mems = np.stack([states.get(c, np.zeros_like(states[0])) for c in memory_columns], axis=2)
        memory_mask = (memory_columns[None] >= first[:, None]).astype(np.int32)
        window_columns = np.arange(index - window, index + 1)
        real = ((window_columns[None] >= first[:, None]) & (window_columns[None] < index)).astype(np.int32)
        outputs = backbone({"token_ids": ids[:, np.clip(window_columns, 0, None)],
                            "segment_ids": np.zeros((batch, window + 1), np.int32), "padding_mask": real,
                            "target_mapping": np.eye(window + 1, dtype="float32")[None, [window]].repeat(batch, 0),
                            "mems": mems.astype("float32"), "memory_padding_mask": memory_mask},
                           training=False, output_hidden_states=True)
        states[index - window] = np.asarray(outputs["hidden_states"])[:, :layers, 0]
        logits.append(np.asarray(model._logits(outputs["query_output"]))[:, 0])
        ids[:, index] = token
    return np.stack(logits, axis=1)  # [B, steps, V]


def projected_logits(model, ids, mask, continuation=None):
    """Every step's logits from the loop's own halves, `build_cache` then `call_with_cache`, fed `continuation`
    (None: each step's greedy token).

    The loop writes row b's k-th token at column `len(prompt b) + k`, from the shortest prompt's end on; each
    row's logits are read at its own columns, so the rows of longer prompts step through their prompt first.
    """
    token_ids, cache, start = model.build_cache(ids, mask)
    token_ids = np.array(token_ids)
    lengths = mask.sum(axis=1)
    steps = NEW_TOKENS if continuation is None else continuation.shape[1]
    logits = [[None] * steps for _ in lengths]
    for index in range(int(start), int(lengths.max()) + steps):
        step_logits, _, cache = model.call_with_cache(token_ids, cache, index)
        for row, length in enumerate(lengths):
            step = index - length
            if 0 <= step < steps:
                logits[row][step] = np.asarray(step_logits)[row]
                chosen = logits[row][step].argmax(-1) if continuation is None else continuation[row, step]
                token_ids[row, index] = chosen
    return np.array(logits), cache


@pytest.mark.parametrize("recompute_window", [1, 2])
def test_projected_memory_gives_the_layer_input_memory_s_logits_at_every_step(recompute_window):
    """Left-padded prompts of 2, 5 and 4 tokens: every step's logits equal the layer-input memory's to 1e-5."""
    model = causal_lm(recompute_window)
    ids, mask = left_padded(PROMPTS, NEW_TOKENS)
    continuation = np.random.default_rng(1).integers(9, 40, (len(PROMPTS), NEW_TOKENS)).astype(np.int32)
    expected = layer_input_logits(model, ids, mask, continuation)
    logits, _ = projected_logits(model, ids, mask, continuation)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=0)
    assert np.abs(expected[:, 1:] - expected[:, :1]).max() > 1e-2  # The steps differ: a real comparison.


def test_bfloat16_cache_stays_in_the_compute_dtype_with_the_layer_input_memory_s_tokens():
    """Under mixed_bfloat16 the keys and values are kept in bfloat16, as the layer inputs were: same logits to
    bfloat16's precision, same greedy tokens wherever the choice is clear."""
    model = causal_lm(2, dtype="mixed_bfloat16")
    ids, mask = left_padded(PROMPTS, NEW_TOKENS)
    logits, cache = projected_logits(model, ids, mask)
    logits = np.asarray(logits, np.float32)
    tokens = logits.argmax(-1)
    again = np.asarray(layer_input_logits(model, ids, mask, tokens), np.float32)
    # bfloat16 keeps 8 bits: logits near 4 differ by a few of its steps (0.03) between the two
    # orders of rounding, so a near tie may flip; every clear choice must be the same token.
    tolerance = 0.1
    np.testing.assert_allclose(again, logits, atol=tolerance)
    top_two = np.sort(logits, axis=-1)[..., -2:]
    clear = top_two[..., 1] - top_two[..., 0] > tolerance
    assert clear.sum() >= 0.75 * clear.size  # most steps are compared
    np.testing.assert_array_equal(again.argmax(-1)[clear], tokens[clear])
    assert len(np.unique(tokens)) > 2  # Not one token repeated: a real comparison.
    dtypes = {keras.backend.standardize_dtype(heads.dtype) for heads in cache["memory_keys"] + cache["memory_values"]}
    assert dtypes == {"bfloat16"}


def test_a_step_projects_keys_and_values_of_the_window_alone_at_any_memory_length(monkeypatch):
    """The cache holds each layer's keys and values, `[B, N, T, D]`, not layer inputs; a step projects the
    window and its placeholder only (w + 1 columns per layer), whatever T is; the prompt pass all T columns."""
    model = causal_lm(2)
    config = model.backbone.config
    projected_rows = []
    project = RelativeAttention.project_keys_values

    def counted(self, stream):
        projected_rows.append(int(stream.shape[1]))
        return project(self, stream)

    monkeypatch.setattr(RelativeAttention, "project_keys_values", counted)
    for new_tokens in (3, 12):  # T = 8 and 17 memory slots
        ids, mask = left_padded(PROMPTS, new_tokens)
        length = ids.shape[1]
        projected_rows.clear()
        token_ids, cache, index = model.build_cache(ids, mask)
        assert projected_rows == [length] * config.num_layers
        assert sorted(cache) == ["lengths", "memory_keys", "memory_mask", "memory_values", "prompt_keys",
                                 "prompt_values"]
        for heads in cache["memory_keys"] + cache["memory_values"]:
            assert tuple(heads.shape) == (len(PROMPTS), config.num_heads, length, config.head_dim)
        for step in range(2):
            projected_rows.clear()
            _, _, cache = model.call_with_cache(np.asarray(token_ids), cache, int(index) + step)
            assert projected_rows == [model.recompute_window + 1] * config.num_layers


def test_backbone_with_projected_memory_equals_mems_and_refuses_bad_memory_heads_by_name():
    """`memory_heads` (each layer's `mems` through `project_keys_values`) gives what `mems` gives, both streams;
    `key_value_heads` are the keys and values of `[memory | tokens]`; misuse is refused naming what is wrong."""
    keras.utils.set_random_seed(6)
    backbone = XLNetBackbone(tiny_config(initializer_range=0.5))
    config, rng = backbone.config, np.random.default_rng(2)
    batch, length, memory_length = 2, 3, 4
    inputs = {"token_ids": rng.integers(9, 40, (batch, length)).astype(np.int32),
              "segment_ids": np.zeros((batch, length), np.int32), "padding_mask": np.ones((batch, length), np.int32),
              "target_mapping": np.eye(length, dtype="float32")[None, [2]].repeat(batch, 0),
              "memory_padding_mask": np.array([[0, 1, 1, 1], [1, 1, 1, 1]], np.int32)}
    mems = rng.normal(size=(batch, config.num_layers, memory_length, config.hidden_dim)).astype("float32")
    expected = backbone(dict(inputs, mems=mems), training=False, output_hidden_states=True)
    memory_heads = tuple(block.attention.project_keys_values(mems[:, i]) for i, block in enumerate(backbone.blocks))
    outputs = backbone(inputs, training=False, memory_heads=memory_heads, output_key_value_heads=True)
    for name in ("sequence_output", "query_output"):
        np.testing.assert_allclose(np.asarray(outputs[name]), np.asarray(expected[name]), atol=1e-5)
    for index, (keys, values) in enumerate(outputs["key_value_heads"]):
        layer_input = np.asarray(expected["hidden_states"])[:, index]
        joined = np.concatenate([mems[:, index], layer_input], axis=1)  # [B, M + L, H]
        attention = backbone.blocks[index].attention
        np.testing.assert_allclose(np.asarray(keys), np.asarray(attention.project_keys_values(joined)[0]), atol=1e-5)
        np.testing.assert_allclose(np.asarray(values), np.asarray(attention.project_keys_values(joined)[1]),
                                   atol=1e-5)
    with pytest.raises(ValueError, match=r"as 'mems' \(layer inputs\) or as memory_heads .* not both"):
        backbone(dict(inputs, mems=mems), training=False, memory_heads=memory_heads)
    with pytest.raises(ValueError, match=r"memory_heads must be 2 \(keys, values\) pairs, one per layer"):
        backbone(inputs, training=False, memory_heads=memory_heads[:1])
    wrong = ((memory_heads[0][0], np.zeros((batch, config.num_heads, memory_length, 3), "float32")),) + memory_heads[1:]
    with pytest.raises(ValueError, match=r"'memory_heads\[0\] values' has shape \(2, 2, 4, 3\), expected "):
        backbone(inputs, training=False, memory_heads=wrong)
    with pytest.raises(ValueError, match=r"memory_heads and output_key_value_heads are for inference"):
        backbone(inputs, training=True, memory_heads=memory_heads)
