"""`XLNetCausalLM`: parity with Hugging Face's `generate`, batch invariance, samplers, XLA."""

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import keras

from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
from xlnet_tf.convert.write_preset import write_preset
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM

VOCABULARY = 200
NEW_TOKENS = 8
pytestmark = pytest.mark.parity


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random tiny Hugging Face `XLNetLMHeadModel` and our conversion of it (a pretraining preset)."""
    torch.manual_seed(0)
    config = transformers.XLNetConfig(vocab_size=VOCABULARY, d_model=16, n_layer=2, n_head=2, d_inner=32,
                                      dropout=0.0, mem_len=None, initializer_range=0.3)
    hf_model = transformers.XLNetLMHeadModel(config).eval()  # Large weights: attention far from uniform.
    with torch.no_grad():  # A non-zero output bias, so the bias is part of the parity.
        hf_model.lm_loss.bias.normal_(0.0, 0.5)
    hf_dir = tmp_path_factory.mktemp("hf")
    hf_model.save_pretrained(str(hf_dir))
    pretrainer, _, _ = convert_transformers_checkpoint(str(hf_dir))
    preset = write_preset(pretrainer, str(tmp_path_factory.mktemp("preset") / "preset"))
    return hf_model, preset


def hf_generate(hf_model, prompts, use_mems, attention_mask=None, new_tokens=NEW_TOKENS):
    with torch.no_grad():
        out = hf_model.generate(torch.tensor(prompts), attention_mask=attention_mask, max_new_tokens=new_tokens,
                                min_new_tokens=new_tokens, do_sample=False, use_mems=use_mems,
                                output_logits=True, return_dict_in_generate=True, pad_token_id=5,
                                eos_token_id=None)
    tokens = out.sequences[:, len(prompts[0]):].numpy()
    return tokens, np.stack([step.numpy() for step in out.logits], axis=1)  # [B, N], [B, N, V]


def left_padded(prompts, width=None):
    width = width or max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), 5, np.int32)
    mask = np.zeros((len(prompts), width), np.int32)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = prompt
        mask[row, width - len(prompt):] = 1
    return ids, mask


def generated(model, prompts, new_tokens=NEW_TOKENS, **kwargs):
    """Each row's continuation, from id prompts left-padded with room for `new_tokens`."""
    width = max(len(p) for p in prompts)
    ids, mask = left_padded(prompts, width)
    pad = np.zeros((len(prompts), new_tokens), np.int32)
    out = model.generate({"token_ids": np.concatenate([ids, pad + 5], 1),
                          "padding_mask": np.concatenate([mask, pad], 1)}, stop_token_ids=None, **kwargs)
    rows = []
    for row, prompt in enumerate(prompts):
        tokens = out["token_ids"][row][out["padding_mask"][row]]
        np.testing.assert_array_equal(tokens[:len(prompt)], prompt)
        rows.append(tokens[len(prompt):len(prompt) + new_tokens])
    return np.stack(rows)


def step_logits(model, prompt, continuation):
    """The logits `call_with_cache` (the loop's step) gives at every step, fed `continuation`."""
    ids = np.zeros((1, len(prompt) + len(continuation)), np.int32)
    ids[0, :len(prompt)] = prompt
    mask = (np.arange(ids.shape[1]) < len(prompt)).astype(np.int32)[None]
    token_ids, cache, index = model.build_cache(ids, mask)
    token_ids = np.array(token_ids)
    logits = []
    for step, token in enumerate(continuation):
        step_out, _, cache = model.call_with_cache(token_ids, cache, int(index) + step)
        logits.append(np.asarray(step_out)[0])
        token_ids[0, int(index) + step] = token
    return np.stack(logits)


PROMPT = [21, 22, 23, 40, 41, 97, 150]


@pytest.mark.parametrize("mode,use_mems", [("exact", False), ("cached", True)])
def test_greedy_tokens_and_every_step_logits_equal_hugging_face(checkpoint, mode, use_mems):
    hf_model, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode=mode)
    hf_tokens, hf_logits = hf_generate(hf_model, [PROMPT], use_mems=use_mems)
    np.testing.assert_array_equal(generated(model, [PROMPT]), hf_tokens)
    np.testing.assert_allclose(step_logits(model, PROMPT, hf_tokens[0]), hf_logits[0], atol=1e-4, rtol=0)


def test_the_two_modes_differ_where_hugging_face_differs(checkpoint):
    """`cached` is an approximation: its logits move away from `exact`'s after the first step."""
    hf_model, preset = checkpoint
    exact = XLNetCausalLM.from_preset(preset, mode="exact")
    cached = XLNetCausalLM.from_preset(preset, mode="cached")
    tokens = hf_generate(hf_model, [PROMPT], use_mems=False)[0][0]
    exact_logits, cached_logits = step_logits(exact, PROMPT, tokens), step_logits(cached, PROMPT, tokens)
    np.testing.assert_allclose(exact_logits[0], cached_logits[0], atol=1e-5, rtol=0)
    assert np.abs(exact_logits[2:] - cached_logits[2:]).max() > 1e-3


BATCH = [list(range(30, 33)), list(range(60, 71)), list(range(9, 34)), list(range(100, 140))]  # 3 to 40


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_left_padded_batch_gives_each_prompt_its_tokens_alone(checkpoint, mode):
    """Prompts of 3 to 40 tokens in one batch get what each gets alone, compiled and under XLA.

    Hugging Face's `prepare_inputs_for_generation` drops the attention mask, so
    its left-padded rows attend to the padding: the same batch through its
    `generate` gives the short prompts other tokens than they get alone. The
    test checks that failure too, so it notices if Hugging Face ever fixes it.
    """
    hf_model, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode=mode)
    model.jit_compile = False
    alone = np.stack([generated(model, [prompt])[0] for prompt in BATCH])  # Each without any padding.
    np.testing.assert_array_equal(generated(model, BATCH), alone)
    model.jit_compile = True
    np.testing.assert_array_equal(generated(model, BATCH), alone)
    ids, mask = left_padded(BATCH)
    hf_together = hf_generate(hf_model, ids.tolist(), use_mems=mode == "cached",
                              attention_mask=torch.tensor(mask))[0]
    hf_alone = np.stack([hf_generate(hf_model, [p], use_mems=mode == "cached")[0][0] for p in BATCH])
    np.testing.assert_array_equal(hf_alone, alone)  # Alone, Hugging Face agrees with us.
    assert (hf_together != hf_alone).any(axis=1).sum() >= 1  # In a batch, it does not.


def test_greedy_is_the_default_and_beam_one_equals_greedy(checkpoint):
    _, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode="cached")
    greedy = generated(model, BATCH[:2], sampler="greedy")
    beam = generated(model, BATCH[:2], sampler=keras_hub.samplers.BeamSampler(num_beams=1))
    np.testing.assert_array_equal(beam, greedy)
    beam3 = generated(model, BATCH[:2], sampler=keras_hub.samplers.BeamSampler(num_beams=3))
    assert beam3.shape == greedy.shape


@pytest.mark.slow
@pytest.mark.parametrize("name", ["top_k", "top_p"])
def test_fixed_seed_gives_the_same_tokens_every_run_eager_graph_and_xla(checkpoint, name):
    """A seed fixes the tokens: eagerly and in the compiled loop alike, and again under XLA.

    Eager and XLA draws are not the same: TensorFlow's CPU kernel of
    `stateless_categorical` (keras-hub's samplers draw with it) searches the
    cumulative distribution, its XLA kernel takes the Gumbel-max of the same
    seed's uniforms. Both are reproducible, which is what this checks.
    """
    _, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode="exact")

    def sampler(seed=7):
        if name == "top_k":
            return keras_hub.samplers.TopKSampler(k=20, seed=seed, temperature=3.0)
        return keras_hub.samplers.TopPSampler(p=0.95, seed=seed, temperature=3.0)

    model.run_eagerly = True
    eager = generated(model, BATCH[:2], sampler=sampler())
    model.run_eagerly = False
    model.jit_compile = False
    np.testing.assert_array_equal(generated(model, BATCH[:2], sampler=sampler()), eager)
    model.jit_compile = True
    xla = generated(model, BATCH[:2], sampler=sampler())
    np.testing.assert_array_equal(generated(model, BATCH[:2], sampler=sampler()), xla)
    assert (generated(model, BATCH[:2], sampler=sampler(seed=8)) != xla).any()
    assert (xla != generated(model, BATCH[:2], sampler="greedy")).any()  # A hot sampler does sample.


def test_top_k_never_emits_a_token_outside_the_k_best(checkpoint):
    _, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode="exact")
    k = 3
    tokens = generated(model, [PROMPT], new_tokens=12,
                       sampler=keras_hub.samplers.TopKSampler(k=k, seed=1, temperature=5.0))[0]
    logits = step_logits(model, PROMPT, tokens)
    best = np.argsort(-logits, axis=-1)[:, :k]
    assert all(token in best[step] for step, token in enumerate(tokens))
    assert (tokens != best[:, 0]).any()  # Not greedy in disguise.


def test_keras_file_round_trip_keeps_mode_window_bias_and_tokens(checkpoint, tmp_path):
    _, preset = checkpoint
    model = XLNetCausalLM.from_preset(preset, mode="cached", recompute_window=3)
    assert float(np.abs(np.asarray(model.lm_bias)).max()) > 0  # The pretrainer's bias came along.
    path = str(tmp_path / "generator.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.mode, loaded.recompute_window) == ("cached", 3)
    np.testing.assert_array_equal(generated(loaded, [PROMPT]), generated(model, [PROMPT]))


def test_bad_settings_are_refused_by_name(checkpoint):
    _, preset = checkpoint
    with pytest.raises(ValueError, match=r"mode must be one of \['exact', 'cached'\], got 'fast'"):
        XLNetCausalLM.from_preset(preset, mode="fast")
    with pytest.raises(ValueError, match="recompute_window must be an int >= 1, got 0"):
        XLNetCausalLM.from_preset(preset, mode="cached", recompute_window=0)
