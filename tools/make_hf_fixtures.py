"""Regenerates the Hugging Face parity fixtures in `tests/testdata/hf_parity/`.

Each case directory holds a random tiny `XLNetLMHeadModel` saved with
`save_pretrained` (`config.json` + `model.safetensors`) and `io.npz` with the
inputs it was run on and everything it returned, so the test suite can check
our Keras model against Hugging Face's PyTorch XLNet without importing torch.
Some cases also get `tf1/`: the same weights written as a TF1 checkpoint under
the variable names of the original zihangdai/xlnet code, with an original
`xlnet_config.json`, to test the `tf1` converter against the same outputs.

`io.npz` layout (batch-major, float32 unless noted). A case runs one or more
consecutive segments `k = 0, 1, ...`; every key is prefixed with `seg{k}_`:
  inputs:  token_ids int32 [B, L], segment_ids int32 [B, L], padding_mask int32 [B, L] (1 = real),
           perm_mask [B, L, L] (optional), target_mapping [B, P, L] (optional),
           mems [B, num_layers, M, H] (optional; segment k > 0 always uses segment k-1's new_mems)
  outputs: logits [B, L, V] or [B, P, V] (query stream when target_mapping is given),
           hidden_states [num_layers + 1, B, L, H] (content stream: embeddings, then each layer's output),
           query_hidden_states [num_layers + 1, B, P, H] (with target_mapping),
           new_mems [B, num_layers, memory_length, H] (when mem_len > 0)
plus `num_segments` (int32 scalar).

Run from the repository root with torch and transformers installed:
    python tools/make_hf_fixtures.py [--output tests/testdata/hf_parity]
"""

import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers

PAD_ID = 5
SEG_ID_PAD = 4  # Segment id the original fine-tuning code gives to padding.

# Each case: HF config overrides, batch layout and what to feed per segment.
CASES = {
    # Content stream only, left padding of different lengths per row.
    "content_left_pad": dict(
        config=dict(n_layer=2, d_model=24, n_head=3, d_inner=40, ff_activation="gelu"),
        batch=3, length=10, left_pad=[0, 3, 6], segments=1),
    # Two-stream attention: random factorization order, perm_mask + target_mapping,
    # one row padded. Original-code "gelu" is the tanh form (HF "gelu_new").
    "two_stream": dict(
        config=dict(n_layer=2, d_model=16, n_head=2, d_inner=32, ff_activation="gelu_new"),
        batch=2, length=10, left_pad=[0, 2], segments=1, num_predict=4, tf1=True),
    # Two segments through memory, no reuse_len: segment 0 has no mems.
    "mems": dict(
        config=dict(n_layer=2, d_model=16, n_head=2, d_inner=32, mem_len=6),
        batch=2, length=8, segments=2),
    # Pretraining-like recurrence: reuse_len < length, two-stream in both segments,
    # explicit initial mems so every segment sees memory_length cached positions.
    "mems_reuse": dict(
        config=dict(n_layer=2, d_model=16, n_head=2, d_inner=32, mem_len=6, reuse_len=4),
        batch=2, length=8, segments=2, num_predict=3, initial_mems=6),
    # bi_data: forward positions for the first half of the batch, backward for the second.
    "bi_data": dict(
        config=dict(n_layer=2, d_model=16, n_head=2, d_inner=32, bi_data=True, mem_len=4),
        batch=4, length=8, segments=1, num_predict=3, initial_mems=4),
    # Causal attention with same_length, through memory.
    "uni_same_length": dict(
        config=dict(n_layer=2, d_model=16, n_head=2, d_inner=32, attn_type="uni",
                    same_length=True, mem_len=5),
        batch=2, length=6, segments=2),
    # Relative distances clamped; memory makes distances larger than the segment.
    "clamp_len": dict(
        config=dict(n_layer=2, d_model=16, n_head=4, d_inner=32, clamp_len=3, mem_len=4,
                    layer_norm_eps=1e-5),
        batch=2, length=10, segments=1, initial_mems=4),
    # Tied relative biases (one set shared by all layers) with relu.
    "tied_relu": dict(
        config=dict(n_layer=3, d_model=16, n_head=2, d_inner=32, untie_r=False, ff_activation="relu"),
        batch=2, length=9, left_pad=[0, 4], segments=1, tf1=True),
    # Exact (erf) gelu, wider model, two-stream with padding.
    "gelu": dict(
        config=dict(n_layer=3, d_model=32, n_head=4, d_inner=48, ff_activation="gelu"),
        batch=2, length=8, left_pad=[1, 0], segments=1, num_predict=3),
}

VOCAB = 50


def _randomize(model, rng, tied):
    """Gives every parameter a non-trivial value: no zeros, no ones, biases included."""
    state = {}
    for name, param in model.state_dict().items():
        shape = tuple(param.shape)
        if name.endswith("layer_norm.weight"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("layer_norm.bias") or name.endswith("ff.layer_1.bias") \
                or name.endswith("ff.layer_2.bias") or name == "lm_loss.bias":
            value = 0.2 * rng.standard_normal(shape)
        elif name.endswith(("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")):
            value = 0.3 * rng.standard_normal(shape)
        elif name.endswith("word_embedding.weight") or name.endswith("mask_emb"):
            value = 0.5 * rng.standard_normal(shape)
        elif param.ndim >= 2:
            # Kernels: scale so attention scores are far from uniform yet bounded.
            value = rng.standard_normal(shape) * (1.2 / np.sqrt(shape[0] if param.ndim == 3 else shape[1]))
        else:
            raise ValueError(f"No random rule for parameter {name} {shape}")
        state[name] = torch.tensor(value, dtype=torch.float32)
    if tied:
        # Hugging Face keeps per-layer biases even when untie_r=False; make them equal.
        for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
            shared = state[f"transformer.layer.0.rel_attn.{bias}"]
            for i in range(model.config.n_layer):
                state[f"transformer.layer.{i}.rel_attn.{bias}"] = shared.clone()
    state["lm_loss.weight"] = state["transformer.word_embedding.weight"]
    model.load_state_dict(state)


def _permutation_inputs(rng, padding_mask, num_predict):
    """perm_mask [B, L, L] and target_mapping [B, P, L] from a random factorization order.

    Targets see the context and the targets earlier in the order; context tokens
    never see targets. Only real (unpadded) positions are targets, and every row
    keeps at least one visible key, so no softmax row is fully masked.
    """
    batch, length = padding_mask.shape
    perm_mask = np.zeros([batch, length, length], np.float32)
    target_mapping = np.zeros([batch, num_predict, length], np.float32)
    for b in range(batch):
        real = np.flatnonzero(padding_mask[b])
        targets = rng.choice(real, num_predict, replace=False)
        rank = np.empty(length, np.int64)
        rank[rng.permutation(length)] = np.arange(length)
        is_target = np.zeros(length, bool)
        is_target[targets] = True
        for i in range(length):
            for j in range(length):
                if is_target[j] and (not is_target[i] or rank[j] >= rank[i]):
                    perm_mask[b, i, j] = 1.0
        for k, position in enumerate(targets):  # Random prediction order, not sorted.
            target_mapping[b, k, position] = 1.0
    return perm_mask, target_mapping


def _segment_inputs(rng, spec):
    batch, length = spec["batch"], spec["length"]
    left_pad = spec.get("left_pad", [0] * batch)
    padding_mask = np.ones([batch, length], np.int32)
    token_ids = rng.integers(9, VOCAB, size=[batch, length]).astype(np.int32)
    segment_ids = np.zeros([batch, length], np.int32)
    for b in range(batch):
        # Layout `A <sep> B <sep> <cls>`: segment ids 0 / 1 / 2, padding on the left.
        real = length - left_pad[b]
        split = left_pad[b] + max(1, real // 2)
        segment_ids[b, split:] = 1
        segment_ids[b, -1] = 2
        padding_mask[b, :left_pad[b]] = 0
        token_ids[b, :left_pad[b]] = PAD_ID
        segment_ids[b, :left_pad[b]] = SEG_ID_PAD
    inputs = dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask)
    if spec.get("num_predict"):
        inputs["perm_mask"], inputs["target_mapping"] = _permutation_inputs(
            rng, padding_mask, spec["num_predict"])
    return inputs


def _run_hf(model, inputs, mems):
    config = model.config
    kwargs = dict(
        input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
        token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
        output_hidden_states=True,
        use_mems=bool(config.mem_len),
        return_dict=True,
    )
    if not inputs["padding_mask"].all():
        # Only when needed: HF's uni attention fails to broadcast a data mask over a batch > 1.
        kwargs["attention_mask"] = torch.tensor(inputs["padding_mask"], dtype=torch.float32)
    if "perm_mask" in inputs:
        kwargs["perm_mask"] = torch.tensor(inputs["perm_mask"])
        kwargs["target_mapping"] = torch.tensor(inputs["target_mapping"])
    if mems is not None:
        # Ours [B, layers, M, H] -> HF's list of [M, B, H] per layer.
        kwargs["mems"] = [torch.tensor(mems[:, i].transpose(1, 0, 2)) for i in range(config.n_layer)]
    with torch.no_grad():
        out = model(**kwargs)
    result = {"logits": out.logits.numpy()}
    hidden = [h.numpy() for h in out.hidden_states]
    if "target_mapping" in inputs:
        result["hidden_states"] = np.stack(hidden[0::2])
        result["query_hidden_states"] = np.stack(hidden[1::2])
    else:
        result["hidden_states"] = np.stack(hidden)
    if config.mem_len:
        result["new_mems"] = np.stack([m.numpy().transpose(1, 0, 2) for m in out.mems], axis=1)
    return result


def _write_tf1_checkpoint(model, directory):
    """Writes the weights under the original zihangdai/xlnet variable names (TF1 graph + Saver)."""
    import tensorflow as tf

    config = model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    variables = {
        "model/transformer/word_embedding/lookup_table": sd["transformer.word_embedding.weight"],
        "model/transformer/mask_emb/mask_emb": sd["transformer.mask_emb"],
        "model/lm_loss/bias": sd["lm_loss.bias"],
        "model/transformer/seg_embed": np.stack(
            [sd[f"transformer.layer.{i}.rel_attn.seg_embed"] for i in range(config.n_layer)]),
    }
    for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
        per_layer = np.stack([sd[f"transformer.layer.{i}.rel_attn.{bias}"] for i in range(config.n_layer)])
        variables[f"model/transformer/{bias}"] = per_layer if config.untie_r else per_layer[0]
    for i in range(config.n_layer):
        src, dst = f"transformer.layer.{i}", f"model/transformer/layer_{i}"
        for proj in ("q", "k", "v", "r", "o"):
            variables[f"{dst}/rel_attn/{proj}/kernel"] = sd[f"{src}.rel_attn.{proj}"]
        variables[f"{dst}/rel_attn/LayerNorm/gamma"] = sd[f"{src}.rel_attn.layer_norm.weight"]
        variables[f"{dst}/rel_attn/LayerNorm/beta"] = sd[f"{src}.rel_attn.layer_norm.bias"]
        for dense in ("layer_1", "layer_2"):
            variables[f"{dst}/ff/{dense}/kernel"] = sd[f"{src}.ff.{dense}.weight"].T
            variables[f"{dst}/ff/{dense}/bias"] = sd[f"{src}.ff.{dense}.bias"]
        variables[f"{dst}/ff/LayerNorm/gamma"] = sd[f"{src}.ff.layer_norm.weight"]
        variables[f"{dst}/ff/LayerNorm/beta"] = sd[f"{src}.ff.layer_norm.bias"]
    # Optimizer slots as the original AdamWeightDecayOptimizer names them; a converter must skip them.
    for name in ("model/transformer/word_embedding/lookup_table",
                 "model/transformer/layer_0/ff/layer_1/kernel"):
        variables[f"{name}/adam_m"] = np.full_like(variables[name], 0.25)
        variables[f"{name}/adam_v"] = np.full_like(variables[name], 0.75)

    os.makedirs(directory, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        tf_vars = [tf.compat.v1.Variable(np.asarray(value, np.float32), name=name)
                   for name, value in sorted(variables.items())]
        tf_vars.append(tf.compat.v1.Variable(np.int64(1000), name="global_step"))
        saver = tf.compat.v1.train.Saver(tf_vars)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(directory, "xlnet_model.ckpt"),
                       write_meta_graph=False, write_state=False)
    activation = {"gelu_new": "gelu", "relu": "relu"}[config.ff_activation]
    original_config = {
        "d_head": config.d_head, "d_inner": config.d_inner, "d_model": config.d_model,
        "ff_activation": activation, "n_head": config.n_head, "n_layer": config.n_layer,
        "n_token": config.vocab_size, "untie_r": config.untie_r,
    }
    with open(os.path.join(directory, "xlnet_config.json"), "w") as f:
        json.dump(original_config, f, indent=2, sort_keys=True)
        f.write("\n")


def make_case(name, spec, output_dir, seed):
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    # untie_r is no longer a field of transformers 5's XLNetConfig (its layers always hold
    # their own biases) but it is kept in config.json, where our converter reads it.
    hf_config = dict(vocab_size=VOCAB, dropout=0.0, pad_token_id=PAD_ID, untie_r=True, mem_len=None)
    hf_config.update(spec["config"])
    config = transformers.XLNetConfig(**hf_config)
    model = transformers.XLNetLMHeadModel(config).eval()
    _randomize(model, rng, tied=not config.untie_r)

    case_dir = os.path.join(output_dir, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    model.save_pretrained(case_dir)
    os.remove(os.path.join(case_dir, "generation_config.json"))  # Not part of the model.

    arrays = {"num_segments": np.int32(spec["segments"])}
    mems = None
    if spec.get("initial_mems"):
        mems = rng.standard_normal(
            [spec["batch"], config.n_layer, spec["initial_mems"], config.d_model]).astype(np.float32)
    for k in range(spec["segments"]):
        inputs = _segment_inputs(rng, spec)
        if mems is not None:
            inputs["mems"] = mems
        outputs = _run_hf(model, inputs, mems)
        for key, value in {**inputs, **outputs}.items():
            arrays[f"seg{k}_{key}"] = value
        mems = outputs.get("new_mems")
    np.savez_compressed(os.path.join(case_dir, "io.npz"), **arrays)
    if spec.get("tf1"):
        _write_tf1_checkpoint(model, os.path.join(case_dir, "tf1"))
    return case_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join("tests", "testdata", "hf_parity"))
    args = parser.parse_args()
    os.makedirs(args.output, exist_ok=True)
    for seed, (name, spec) in enumerate(CASES.items()):
        case_dir = make_case(name, spec, args.output, seed=1234 + seed)
        size = sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(case_dir) for f in files)
        print(f"{name:<18} {size / 1024:7.1f} KiB  {case_dir}")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
