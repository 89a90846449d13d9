"""`XLNetCausalLM`: parity with Hugging Face's `generate`, batch invariance, samplers, XLA."""

import keras
import numpy as np
import pytest

from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
from xlnet_tf.convert.write_preset import write_preset
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
from xlnet_tf.samplers.seeded_sampler import seeded_sampler

keras_hub = pytest.importorskip("keras_hub")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

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


@pytest.fixture(scope="module")
def models(checkpoint):
    """One generator per mode, shared by the tests (each restores what it changes)."""
    _, preset = checkpoint
    return {mode: XLNetCausalLM.from_preset(preset, mode=mode) for mode in ("exact", "cached")}


@pytest.fixture(scope="module")
def hf_greedy(checkpoint):
    """Hugging Face's greedy tokens and step logits for `PROMPT`, per mode."""
    hf_model, _ = checkpoint
    return {mode: hf_generate(hf_model, [PROMPT], use_mems=mode == "cached") for mode in ("exact", "cached")}


class compiled_as:
    """Sets `jit_compile` / `run_eagerly` on a shared model for a block, then restores them."""

    def __init__(self, model, **settings):
        self.model, self.settings = model, settings

    def __enter__(self):
        self.saved = {name: getattr(self.model, name) for name in self.settings}
        for name, value in self.settings.items():
            setattr(self.model, name, value)
        return self.model

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            setattr(self.model, name, value)


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


@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_greedy_tokens_and_every_step_logits_equal_hugging_face(models, hf_greedy, mode):
    """`exact` equals Hugging Face's `use_mems=False`, `cached` its mems path: tokens, and logits to 1e-4."""
    model = models[mode]
    hf_tokens, hf_logits = hf_greedy[mode]
    np.testing.assert_array_equal(generated(model, [PROMPT]), hf_tokens)
    np.testing.assert_allclose(step_logits(model, PROMPT, hf_tokens[0]), hf_logits[0], atol=1e-4, rtol=0)


def test_the_two_modes_differ_where_hugging_face_differs(models, hf_greedy):
    """`cached` is an approximation: its logits move away from `exact`'s after the first step."""
    tokens = hf_greedy["exact"][0][0]
    exact_logits = step_logits(models["exact"], PROMPT, tokens)
    cached_logits = step_logits(models["cached"], PROMPT, tokens)
    np.testing.assert_allclose(exact_logits[0], cached_logits[0], atol=1e-5, rtol=0)
    assert np.abs(exact_logits[2:] - cached_logits[2:]).max() > 1e-3


BATCH = [list(range(30, 33)), list(range(60, 71)), list(range(9, 34)), list(range(100, 140))]  # 3 to 40


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_left_padded_batch_gives_each_prompt_its_tokens_alone(checkpoint, models, mode):
    """Prompts of 3 to 40 tokens in one batch get what each gets alone, compiled and under XLA.

    Each prompt alone runs eagerly, without any padding; the batch runs in the
    compiled loop and under XLA (one XLA compile per mode).

    Hugging Face's `prepare_inputs_for_generation` drops the attention mask, so
    its left-padded rows attend to the padding: the same batch through its
    `generate` gives the short prompts other tokens than they get alone. The
    test checks that failure too, so it notices if Hugging Face ever fixes it.
    """
    hf_model, _ = checkpoint
    model = models[mode]
    with compiled_as(model, run_eagerly=True):
        alone = np.stack([generated(model, [prompt])[0] for prompt in BATCH])
    with compiled_as(model, jit_compile=False):
        np.testing.assert_array_equal(generated(model, BATCH), alone)
    with compiled_as(model, jit_compile=True):
        np.testing.assert_array_equal(generated(model, BATCH), alone)
    ids, mask = left_padded(BATCH)
    hf_together = hf_generate(hf_model, ids.tolist(), use_mems=mode == "cached",
                              attention_mask=torch.tensor(mask))[0]
    wrong = np.flatnonzero((hf_together != alone).any(axis=1))
    assert len(wrong) >= 1  # In a batch, Hugging Face gives some prompt other tokens than we do ...
    for row in wrong:  # ... which it gives alone exactly as we do: its batch is what is wrong.
        np.testing.assert_array_equal(hf_generate(hf_model, [BATCH[row]], use_mems=mode == "cached")[0][0],
                                      alone[row])


def test_greedy_is_the_default_and_beam_one_equals_greedy(models, hf_greedy):
    model = models["cached"]
    greedy = generated(model, [PROMPT])
    np.testing.assert_array_equal(greedy, hf_greedy["cached"][0])
    beam = generated(model, [PROMPT], sampler=keras_hub.samplers.BeamSampler(num_beams=1))
    np.testing.assert_array_equal(beam, greedy)
    model.compile(sampler="greedy")  # Back to the shared default.


SAMPLERS = {"top_k": lambda seed: keras_hub.samplers.TopKSampler(k=20, seed=seed, temperature=3.0),
            "top_p": lambda seed: keras_hub.samplers.TopPSampler(p=0.95, seed=seed, temperature=3.0),
            "random": lambda seed: keras_hub.samplers.RandomSampler(seed=seed, temperature=3.0)}


def reseed(sampler, seed):
    """Restarts a sampler's seed generator at `seed` (what a new `sampler(seed=seed)` starts from)."""
    sampler.seed_generator.state.assign(np.array([seed, 0], "int64"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_fixed_seed_gives_the_same_tokens_every_run_eager_graph_and_xla(models, name):
    """A seed fixes the tokens: eagerly, in the compiled loop and under XLA alike, on every run.

    keras-hub's own samplers draw with `tf.random.stateless_categorical`, whose
    CPU and XLA kernels give other tokens for one seed; `XLNetCausalLM` swaps
    them for `seeded_sampler`'s, which draw the same with and without XLA.
    The sampler object is reseeded rather than rebuilt, so the loop is traced
    once per setting (one XLA compile).
    """
    model = models["exact"]
    sampler = SAMPLERS[name](7)
    with compiled_as(model, run_eagerly=True):
        eager = generated(model, BATCH[:2], sampler=sampler)
    assert type(model.sampler).__name__.startswith("Seeded")
    with compiled_as(model, jit_compile=False):
        reseed(sampler, 7)
        np.testing.assert_array_equal(generated(model, BATCH[:2]), eager)
    with compiled_as(model, jit_compile=True):
        reseed(sampler, 7)
        np.testing.assert_array_equal(generated(model, BATCH[:2]), eager)
        reseed(sampler, 7)
        np.testing.assert_array_equal(generated(model, BATCH[:2]), eager)
        reseed(sampler, 8)
        assert (generated(model, BATCH[:2]) != eager).any()  # The seed matters: it does sample.
    model.compile(sampler="greedy")  # Back to the shared default.


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_seeded_draw_is_the_same_with_and_without_xla_where_keras_hub_s_is_not(name):
    """The samplers' draw alone, over many rows: XLA gives the eager tokens; keras-hub's own sampler does not."""
    import tensorflow as tf

    probabilities = tf.nn.softmax(np.random.default_rng(0).normal(0, 2, (256, VOCABULARY)).astype("float32"))
    theirs = SAMPLERS[name](3)
    ours = seeded_sampler(SAMPLERS[name](3))
    assert type(ours).__name__.startswith("Seeded") and type(seeded_sampler(name)) is type(ours)

    def draws(sampler, seed, jit_compile):
        reseed(sampler, seed)
        if jit_compile is None:
            return sampler.get_next_token(probabilities).numpy()
        return tf.function(sampler.get_next_token, jit_compile=jit_compile)(probabilities).numpy()

    eager = draws(ours, 3, None)
    np.testing.assert_array_equal(draws(ours, 3, True), eager)
    np.testing.assert_array_equal(draws(ours, 3, False), eager)
    assert (draws(ours, 4, True) != eager).any()
    assert (draws(theirs, 3, True) != draws(theirs, 3, None)).any()  # keras-hub's CPU and XLA kernels differ.


def test_top_k_never_emits_a_token_outside_the_k_best(models):
    model = models["exact"]
    k = 3
    tokens = generated(model, [PROMPT], new_tokens=12,
                       sampler=keras_hub.samplers.TopKSampler(k=k, seed=1, temperature=5.0))[0]
    model.compile(sampler="greedy")
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


def test_a_stop_token_ends_the_row_and_the_loop_when_every_row_stopped(models, hf_greedy):
    """The output ends with the first stop token, and the loop runs no step after every row stopped."""
    model = models["exact"]
    tokens = hf_greedy["exact"][0][0]
    stop = int(tokens[0])  # The first greedy token (this model repeats it, so no later one would do).
    steps = []
    step = model.call_with_cache

    def counted(*args):
        steps.append(1)
        return step(*args)

    width = len(PROMPT) + NEW_TOKENS
    ids = np.zeros((1, width), np.int32)
    ids[0, :len(PROMPT)] = PROMPT
    mask = (np.arange(width) < len(PROMPT))[None]
    with compiled_as(model, run_eagerly=True):
        model.call_with_cache = counted
        try:
            out = model.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=[stop])
        finally:
            del model.call_with_cache
    np.testing.assert_array_equal(out["token_ids"][0][out["padding_mask"][0]], PROMPT + [stop])
    assert len(steps) == 1  # Not NEW_TOKENS: the loop ended at the stop token.
