import numpy as np
import pytest

from tests.harness import run_layer_test
from xlnet_tf.layers.relative_attention import RelativeAttention
from xlnet_tf.layers.xlnet_block import XLNetBlock

B, L, H, N, D = 2, 4, 8, 2, 4


def inputs(seed=0, num_heads=N, head_dim=D):
    rng = np.random.default_rng(seed)
    return dict(
        content_stream=rng.normal(size=(B, L, H)).astype("float32"),
        position_encoding=rng.normal(size=(1, 2 * L, H)).astype("float32"),
        segment_different=np.zeros((B, L, L), bool),
        content_mask=np.zeros((B, L, L), bool),
        content_bias=np.zeros((num_heads, head_dim), "float32"),
        positional_bias=np.zeros((num_heads, head_dim), "float32"),
        segment_bias=np.zeros((num_heads, head_dim), "float32"),
        segment_encoding=np.zeros((2, num_heads, head_dim), "float32"),
    )


def layer_norm(x, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def test_reduces_to_plain_attention_without_positions_and_segments():
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = inputs()
    layer(**args)
    layer.position_kernel.assign(np.zeros((H, N, D), "float32"))
    out, _ = layer(**args)
    h = args["content_stream"]
    q = np.einsum("bih,hnd->bnid", h, np.asarray(layer.query_kernel))
    k = np.einsum("bih,hnd->bnid", h, np.asarray(layer.key_kernel))
    v = np.einsum("bih,hnd->bnid", h, np.asarray(layer.value_kernel))
    scores = np.einsum("bnid,bnjd->bnij", q, k) / np.sqrt(D)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    attended = np.einsum("bnij,bnjd->bnid", probs, v)
    expected = layer_norm(h + np.einsum("bnid,hnd->bih", attended, np.asarray(layer.output_kernel)))
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)


def test_segment_term_uses_different_segment_row():
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = inputs()
    rng = np.random.default_rng(3)
    args["segment_encoding"] = rng.normal(size=(2, N, D)).astype("float32")
    same, _ = layer(**args)
    # Swapping the encodings and flipping every comparison must give the same scores.
    flipped = dict(args, segment_encoding=args["segment_encoding"][::-1].copy(),
                   segment_different=np.ones((B, L, L), bool))
    other, _ = layer(**flipped)
    np.testing.assert_allclose(np.asarray(same), np.asarray(other), atol=1e-5)


def test_query_stream_shares_weights_with_content_stream():
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = inputs(1)
    # With the query stream equal to the content stream, identity target mapping and the same mask,
    # both streams must produce the same output.
    content, query = layer(**args, query_stream=args["content_stream"], query_mask=args["content_mask"],
                           target_mapping=np.eye(L, dtype="float32")[None].repeat(B, 0))
    np.testing.assert_allclose(np.asarray(content), np.asarray(query), atol=1e-5)


def test_masked_keys_have_no_influence():
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = inputs(2)
    mask = np.zeros((B, L, 2 * L), bool)
    mask[:, :, 1] = True  # memory column 1 hidden from everybody
    memory = np.random.default_rng(5).normal(size=(B, L, H)).astype("float32")
    args.update(content_mask=mask, segment_different=np.zeros((B, L, 2 * L), bool),
                position_encoding=np.random.default_rng(6).normal(size=(1, 3 * L, H)).astype("float32"))
    out1, _ = layer(**args, memory=memory)
    memory2 = memory.copy()
    memory2[:, 1] += 100.0
    out2, _ = layer(**args, memory=memory2)
    np.testing.assert_allclose(np.asarray(out1), np.asarray(out2), atol=1e-5)


def test_attention_layer_contract():
    # Content stream only: the query output is absent.
    run_layer_test(RelativeAttention, dict(num_heads=3, head_dim=5, dropout=0.2, attention_dropout=0.1,
                                           layer_norm_epsilon=1e-6),
                   inputs(num_heads=3, head_dim=5), ((B, L, H), None))
    # Both streams, two predictions per row.
    args = inputs(7)
    run_layer_test(RelativeAttention, dict(num_heads=N, head_dim=D),
                   dict(args, query_stream=args["content_stream"][:, :2], query_mask=args["content_mask"][:, :2],
                        target_mapping=np.eye(L, dtype="float32")[None, :2].repeat(B, 0)),
                   ((B, L, H), (B, 2, H)))


def test_block_feedforward_golden():
    block = XLNetBlock(hidden_dim=H, num_heads=N, head_dim=D, intermediate_dim=16, activation="relu")
    args = inputs(4)
    content, _ = block(**args)
    attended, _ = block.attention(**args)
    attended = np.asarray(attended)
    w1, b1 = np.asarray(block.feedforward_intermediate.kernel), np.asarray(block.feedforward_intermediate.bias)
    w2, b2 = np.asarray(block.feedforward_output.kernel), np.asarray(block.feedforward_output.bias)
    expected = layer_norm(attended + np.maximum(attended @ w1 + b1, 0) @ w2 + b2)
    np.testing.assert_allclose(np.asarray(content), expected, atol=1e-5)


def test_scores_follow_the_paper_formula_with_memory_and_both_segment_scores():
    # The layer scales the queries instead of the scores and adds only the segment difference (a
    # softmax ignores the per-row constant); the output must equal the textbook formula.
    M = 3
    K = M + L
    rng = np.random.default_rng(11)
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = dict(
        content_stream=rng.normal(size=(B, L, H)).astype("float32"),
        position_encoding=rng.normal(size=(1, K + L, H)).astype("float32"),
        segment_different=rng.random((B, L, K)) < 0.5,
        content_mask=np.zeros((B, L, K), bool),
        content_bias=rng.normal(size=(N, D)).astype("float32"),
        positional_bias=rng.normal(size=(N, D)).astype("float32"),
        segment_bias=rng.normal(size=(N, D)).astype("float32"),
        segment_encoding=rng.normal(size=(2, N, D)).astype("float32"))
    args["content_mask"][:, :, 0] = True
    memory = rng.normal(size=(B, M, H)).astype("float32")
    out, _ = layer(**args, memory=memory)
    h = args["content_stream"]
    keys_input = np.concatenate([memory, h], axis=1)
    kernel = {name: np.asarray(getattr(layer, f"{name}_kernel"))
              for name in ("query", "key", "value", "position", "output")}
    q = np.einsum("bih,hnd->bnid", h, kernel["query"])
    k = np.einsum("bjh,hnd->bnjd", keys_input, kernel["key"])
    v = np.einsum("bjh,hnd->bnjd", keys_input, kernel["value"])
    r = np.einsum("rh,hnd->nrd", args["position_encoding"][0], kernel["position"])
    scores = np.zeros((B, N, L, K))
    for i in range(L):
        for j in range(K):
            content = np.einsum("bnd,bnd->bn", q[:, :, i] + args["content_bias"], k[:, :, j])
            position = np.einsum("bnd,nd->bn", q[:, :, i] + args["positional_bias"], r[:, j + L - i])
            same, different = (np.einsum("bnd,nd->bn", q[:, :, i] + args["segment_bias"],
                                         args["segment_encoding"][s]) for s in (0, 1))  # [B, N] each
            segment = np.where(args["segment_different"][:, i, j, None], different, same)  # [B, N]
            scores[:, :, i, j] = (content + position + segment) / np.sqrt(D)
    scores = np.where(args["content_mask"][:, None], -1e30, scores)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    attended = np.einsum("bnij,bnjd->bnid", probs, v)
    expected = layer_norm(h + np.einsum("bnid,hnd->bih", attended, kernel["output"]))
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)


def test_projected_memory_gives_what_memory_gives_and_the_keys_and_values_read_are_returned():
    """`memory_heads` (the memory through `project_keys_values`) equals `memory`, in both streams and with
    `target_mapping`; `output_key_value_heads` returns the keys and values of `[memory | block]`."""
    M, P = 3, 2
    K = M + L
    rng = np.random.default_rng(12)
    layer = RelativeAttention(num_heads=N, head_dim=D)
    args = dict(inputs(12), position_encoding=rng.normal(size=(1, K + L, H)).astype("float32"),
                segment_different=rng.random((B, L, K)) < 0.5, content_mask=rng.random((B, L, K)) < 0.3,
                content_bias=rng.normal(size=(N, D)).astype("float32"),
                query_stream=rng.normal(size=(B, P, H)).astype("float32"), query_mask=rng.random((B, L, K)) < 0.3,
                target_mapping=np.eye(L, dtype="float32")[None, [1, 3]].repeat(B, 0))
    memory = rng.normal(size=(B, M, H)).astype("float32")
    content, query = layer(**args, memory=memory)
    projected = layer.project_keys_values(memory)
    projected_content, projected_query, (keys, values) = layer(**args, memory_heads=projected,
                                                               output_key_value_heads=True)
    np.testing.assert_allclose(np.asarray(projected_content), np.asarray(content), atol=1e-6)
    np.testing.assert_allclose(np.asarray(projected_query), np.asarray(query), atol=1e-6)
    keys_input = np.concatenate([memory, args["content_stream"]], axis=1)
    for heads, kernel in ((keys, layer.key_kernel), (values, layer.value_kernel)):
        np.testing.assert_allclose(np.asarray(heads), np.einsum("bjh,hnd->bnjd", keys_input, np.asarray(kernel)),
                                   atol=1e-6)
    # With `memory` as layer inputs, the same keys and values.
    _, _, (memory_keys, memory_values) = layer(**args, memory=memory, output_key_value_heads=True)
    np.testing.assert_allclose(np.asarray(memory_keys), np.asarray(keys), atol=1e-6)
    np.testing.assert_allclose(np.asarray(memory_values), np.asarray(values), atol=1e-6)
    with pytest.raises(ValueError, match=r"memory as layer inputs \(memory\) or projected \(memory_heads\)"):
        layer(**args, memory=memory, memory_heads=projected)
