"""Generation probes: `XLNetCausalLM.generate` (both modes, greedy and seeded sampling) on every backend.

TensorFlow builds a tiny generator (a random model with large weights, far
from uniform, and the tiny SentencePiece vocabulary) and saves it as a
generation preset in `workdir`; every backend loads that preset, so all run
the same function. Outputs per mode: the greedy tokens of a mixed-length batch
of id prompts (left- and right-padded), the greedy continuations of string
prompts and the first step's logits of the batch; then the batch with a stop
token, and stripped of the prompt. Sampling: top-k through the loop and each
seeded sampler's draw, twice with one seed and once with another (each backend
has its own random bits, so a seed fixes the tokens per backend).
"""

import os

import keras
import numpy as np

SPIECE = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "tiny_spiece.model")
VOCABULARY = 200  # tiny_spiece.model's
PRESET = "generation_preset"
WIDTH = 8
NEW_TOKENS = 3  # The budget of the stop-token calls.
# Rows 0 and 2 left-padded, row 1 right-padded: the loop lays each prompt out from column 0 itself.
ID_PROMPTS = [[11, 12, 13, 14, 15], [21], [31, 32, 33]]
TEXT_PROMPTS = ["a fine", "a", "the dog"]
SAMPLERS = ("top_k", "top_p", "random")


def id_batch():
    """`ID_PROMPTS` in `WIDTH` columns, even rows left-padded and odd rows right-padded (pad id 5)."""
    ids = np.full((len(ID_PROMPTS), WIDTH), 5, np.int32)
    mask = np.zeros((len(ID_PROMPTS), WIDTH), np.int32)
    for row, prompt in enumerate(ID_PROMPTS):
        columns = slice(WIDTH - len(prompt), WIDTH) if row % 2 == 0 else slice(0, len(prompt))
        ids[row, columns], mask[row, columns] = prompt, 1
    return {"token_ids": ids, "padding_mask": mask}


def generation_preset(workdir, backend):
    """The preset TensorFlow saved in `workdir` (saved here on the TensorFlow run)."""
    path = os.path.join(workdir, PRESET)
    if backend == "tensorflow":
        from tests.harness import tiny_config
        from xlnet_tf.models.xlnet_backbone import XLNetBackbone
        from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
        from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import XLNetCausalLMPreprocessor
        from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

        keras.utils.set_random_seed(5)
        backbone = XLNetBackbone(tiny_config(vocabulary_size=VOCABULARY, initializer_range=0.5))
        model = XLNetCausalLM(backbone, XLNetCausalLMPreprocessor(XLNetTokenizer(SPIECE), sequence_length=12))
        model.lm_bias.assign(np.random.default_rng(0).normal(0, 1, VOCABULARY).astype("float32"))
        model.save_to_preset(path)
    elif not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: the TensorFlow run saves the generation preset; run it first.")
    return path


def first_step_logits(model):
    """The loop's first step (`build_cache`, then `call_with_cache`) on `id_batch()`: float32 `[B, V]`."""
    batch = id_batch()

    def first_step(token_ids, padding_mask):
        token_ids, cache, index = model.build_cache(token_ids, padding_mask)
        return model.call_with_cache(token_ids, cache, index)[0]

    if keras.config.backend() == "jax":
        import jax

        # JAX compiles every op it runs eagerly: one jit of the step compiles it once, seconds faster.
        first_step = jax.jit(first_step)
    return keras.ops.convert_to_numpy(first_step(batch["token_ids"], batch["padding_mask"]))


def probe_generation_greedy(workdir, backend):
    from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM

    model = XLNetCausalLM.from_preset(generation_preset(workdir, backend))
    outputs = {}
    for mode in ("exact", "cached"):
        out = model.generate(id_batch(), stop_token_ids=None, mode=mode)
        outputs[f"{mode}_token_ids"], outputs[f"{mode}_padding_mask"] = out["token_ids"], out["padding_mask"]
        outputs[f"{mode}_first_step_logits"] = first_step_logits(model)
        # Strings go through the preprocessor (tensorflow-text on the CPU), the loop on this backend: the
        # same batch shape as the ids, so the same compiled loop.
        outputs[f"{mode}_texts"] = np.array(model.generate(TEXT_PROMPTS, max_length=WIDTH, stop_token_ids=None,
                                                           strip_prompt=True))
    # A stop token the batch produces (row 1's second new token): rows end at it, the others run on to
    # their budget of `NEW_TOKENS`. The stop and the stripping are the loop's and `generate`'s own, the
    # same in both modes.
    stop = int(outputs["exact_token_ids"][1, len(ID_PROMPTS[1]) + 1])
    stopped = model.generate(id_batch(), stop_token_ids=[stop], max_new_tokens=NEW_TOKENS, mode="exact")
    stripped = model.generate(id_batch(), stop_token_ids=[stop], max_new_tokens=NEW_TOKENS, strip_prompt=True)
    outputs["stop_token"] = np.array(stop)
    outputs["stopped_token_ids"], outputs["stopped_padding_mask"] = stopped["token_ids"], stopped["padding_mask"]
    outputs["stripped_token_ids"], outputs["stripped_padding_mask"] = stripped["token_ids"], stripped["padding_mask"]
    return outputs


def probe_generation_sampling(workdir, backend):
    """Top-k through the loop (the seed state carried by each backend's compiled loop); each sampler's draw."""
    import keras_hub

    from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
    from xlnet_tf.samplers.seeded_sampler import seeded_sampler

    model = XLNetCausalLM.from_preset(generation_preset(workdir, backend), mode="cached")
    outputs = {}
    sampler = keras_hub.samplers.TopKSampler(k=20, seed=7, temperature=3.0)
    for key, seed in (("seed7", 7), ("seed7_again", 7), ("seed8", 8)):
        # Reseeded rather than rebuilt: the loop is compiled once.
        reseed(sampler, seed)
        outputs[f"generate_{key}"] = model.generate(id_batch(), stop_token_ids=None, sampler=sampler)["token_ids"]
        outputs[f"generate_{key}_next"] = model.generate(id_batch(), stop_token_ids=None, sampler=sampler)["token_ids"]
    outputs["generate_sampler"] = np.array(type(model.sampler).__name__)
    probabilities = keras.ops.softmax(np.random.default_rng(0).normal(0, 2, (64, VOCABULARY)).astype("float32"))
    for name in SAMPLERS:
        sampler = seeded_sampler({"top_k": keras_hub.samplers.TopKSampler(k=20, seed=7),
                                  "top_p": keras_hub.samplers.TopPSampler(p=0.9, seed=7),
                                  "random": keras_hub.samplers.RandomSampler(seed=7)}[name])
        for key, seed in (("seed7", 7), ("seed7_again", 7), ("seed8", 8)):
            reseed(sampler, seed)
            outputs[f"{name}_{key}"] = keras.ops.convert_to_numpy(sampler.get_next_token(probabilities))
    outputs["probabilities"] = keras.ops.convert_to_numpy(probabilities)
    return outputs


def reseed(sampler, seed):
    """Restarts a sampler's seed generator at `seed` (where a new `sampler(seed=seed)` starts)."""
    state = sampler.seed_generator.state
    state.assign(keras.ops.convert_to_tensor(np.array([seed, 0]), dtype=state.dtype))
