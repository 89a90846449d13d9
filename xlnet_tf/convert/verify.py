"""`--verify`: compare a converted model with the source implementation on a random batch."""

import os

import numpy as np

from xlnet_tf.convert.conversion_error import ConversionError
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer


def _random_batch(config, seed=0, batch=2, length=12, num_predict=3):
    """A content-stream batch (left padding unless uni attention) and a two-stream one."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(0, config.vocabulary_size, size=(batch, length)).astype(np.int32)
    segment_ids = np.zeros((batch, length), np.int32)
    segment_ids[:, length // 2:] = 1
    segment_ids[:, -1] = 2
    padding_mask = np.ones((batch, length), np.int32)
    if config.attention_type == "bi":
        padding_mask[1, :3] = 0  # Hugging Face's uni attention cannot take a padding mask for batch > 1.
    perm_mask = np.zeros((batch, length, length), np.float32)
    target_mapping = np.zeros((batch, num_predict, length), np.float32)
    for b in range(batch):
        targets = rng.choice(np.arange(3, length), num_predict, replace=False)
        rank = np.empty(length, np.int64)
        rank[rng.permutation(length)] = np.arange(length)
        is_target = np.zeros(length, bool)
        is_target[targets] = True
        blocked = is_target[None, :] & (~is_target[:, None] | (rank[None, :] >= rank[:, None]))
        perm_mask[b] = blocked
        target_mapping[b, np.arange(num_predict), targets] = 1.0
    content = dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask)
    two_stream = dict(content, perm_mask=perm_mask, target_mapping=target_mapping)
    return [content, two_stream]


def _torch_available():
    try:
        import torch  # noqa: F401  optional dependency: PyTorch, only for `--verify`
        import transformers  # noqa: F401  optional dependency: only for `--verify`
    except ImportError:
        return False
    return True


def _hf_model_from_tf1(config, arrays):
    """A Hugging Face XLNetLMHeadModel holding the arrays of an original TF1 checkpoint."""
    import torch  # optional dependency: PyTorch, only for `--verify` against Hugging Face
    import transformers  # optional dependency: transformers, only for `--verify` against Hugging Face

    scope = next(n for n in arrays if n.endswith("transformer/word_embedding/lookup_table"))
    scope = scope[: -len("transformer/word_embedding/lookup_table")]
    t = scope + "transformer/"
    activation = {"gelu_approximate": "gelu_new"}.get(config.activation, config.activation)
    hf_config = transformers.XLNetConfig(
        vocab_size=config.vocabulary_size, d_model=config.hidden_dim, n_layer=config.num_layers,
        n_head=config.num_heads, d_inner=config.intermediate_dim, ff_activation=activation,
        layer_norm_eps=config.layer_norm_epsilon, mem_len=None, dropout=0.0)
    state = {"transformer.word_embedding.weight": arrays[t + "word_embedding/lookup_table"],
             "transformer.mask_emb": arrays[t + "mask_emb/mask_emb"],
             "lm_loss.bias": arrays[scope + "lm_loss/bias"],
             "lm_loss.weight": arrays[t + "word_embedding/lookup_table"]}
    for i in range(config.num_layers):
        hf, tf = f"transformer.layer.{i}.", f"{t}layer_{i}/"
        for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
            value = arrays[t + bias]
            state[hf + "rel_attn." + bias] = value[i] if config.untie_relative_bias else value
        state[hf + "rel_attn.seg_embed"] = arrays[t + "seg_embed"][i]
        for proj in "qkvro":
            state[hf + f"rel_attn.{proj}"] = arrays[tf + f"rel_attn/{proj}/kernel"]
        for hf_ln, tf_ln in (("rel_attn.layer_norm", "rel_attn/LayerNorm"), ("ff.layer_norm", "ff/LayerNorm")):
            state[hf + hf_ln + ".weight"] = arrays[tf + tf_ln + "/gamma"]
            state[hf + hf_ln + ".bias"] = arrays[tf + tf_ln + "/beta"]
        for dense in ("layer_1", "layer_2"):
            state[hf + f"ff.{dense}.weight"] = arrays[tf + f"ff/{dense}/kernel"].T
            state[hf + f"ff.{dense}.bias"] = arrays[tf + f"ff/{dense}/bias"]
    model = transformers.XLNetLMHeadModel(hf_config)
    model.load_state_dict({k: torch.tensor(np.ascontiguousarray(v)) for k, v in state.items()})
    return model.eval()


def _hf_logits(model, batch):
    import torch  # optional dependency: PyTorch, only for `--verify` against Hugging Face

    kwargs = dict(input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
                  token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long), use_mems=False)
    if not batch["padding_mask"].all():
        kwargs["attention_mask"] = torch.tensor(batch["padding_mask"], dtype=torch.float32)
    if "perm_mask" in batch:
        kwargs["perm_mask"] = torch.tensor(batch["perm_mask"])
        kwargs["target_mapping"] = torch.tensor(batch["target_mapping"])
    with torch.no_grad():
        return model(**kwargs).logits.numpy()


def verify_conversion(pretrainer, source, input_path, mapping, preset_dir, log=print):
    """Runs the converted model next to the source and returns the max abs logit difference.

    With torch and transformers importable, the source weights run in Hugging
    Face's PyTorch XLNet (an independent implementation; for `tf1` sources the
    TF1 arrays are loaded into it). Otherwise the preset in `preset_dir` is
    re-loaded and its weights are compared with the source arrays, and its
    logits with those of the in-memory converted model.

    Args:
        pretrainer: the converted `XLNetPretrainer`.
        source: "tf1" or "transformers".
        input_path: what was converted (a `save_pretrained` directory for transformers).
        mapping: the `CheckpointMapping` of the conversion (source arrays, assignments).
        preset_dir: the written preset directory.
        log: where to print progress.

    Returns:
        The largest absolute difference found (float).
    """
    config = pretrainer.backbone.config
    batches = _random_batch(config)
    worst = 0.0
    if _torch_available():
        import transformers  # noqa: F401  optional dependency: only for `--verify`

        if source == "transformers":
            reference = transformers.XLNetLMHeadModel.from_pretrained(input_path).eval()
            reference.config.mem_len = None
        else:
            reference = _hf_model_from_tf1(config, mapping.arrays)
        for name, batch in zip(("content stream", "two-stream"), batches):
            ours = np.asarray(pretrainer(batch, training=False)["logits"])
            theirs = _hf_logits(reference, batch)
            diff = float(np.max(np.abs(ours - theirs)))
            log(f"verify: {name} logits vs Hugging Face PyTorch XLNet "
                f"(transformers {transformers.__version__}): max abs difference {diff:.3g}")
            worst = max(worst, diff)
        return worst

    log("verify: torch/transformers not importable; checking the written preset against the source arrays.")
    reloaded = XLNetPretrainer.from_preset(preset_dir)
    by_path = {v.path: v for v in reloaded.weights}
    for path, (_source_name, value) in mapping.assigned_values.items():
        if path not in by_path:
            raise ConversionError(f"verify: the reloaded preset has no weight {path!r}.")
        diff = float(np.max(np.abs(np.asarray(by_path[path]) - value))) if value.size else 0.0
        worst = max(worst, diff)
    log(f"verify: {len(mapping.assigned_values)} weights reloaded from {os.path.join(preset_dir, '')}; "
        f"max abs difference to the source arrays {worst:.3g}")
    for name, batch in zip(("content stream", "two-stream"), batches):
        ours = np.asarray(pretrainer(batch, training=False)["logits"])
        again = np.asarray(reloaded(batch, training=False)["logits"])
        diff = float(np.max(np.abs(ours - again)))
        log(f"verify: {name} logits, converted vs reloaded preset: max abs difference {diff:.3g}")
        worst = max(worst, diff)
    return worst
