"""`XLNetCausalLM.generate` on JAX and PyTorch gives TensorFlow's greedy tokens; seeded samplers repeat per seed.

The probes (`probes/generation_probes.py`) load one generation preset that the
TensorFlow run saved, so every backend runs the same model.
"""

import numpy as np
import pytest

from tests.backends.backend_harness import BACKENDS, backend_available, probe_output
from tests.backends.probes.generation_probes import ID_PROMPTS, NEW_TOKENS, SAMPLERS, WIDTH

INSTALLED = [backend for backend in BACKENDS if backend_available(backend)]
OTHER_BACKENDS = [backend for backend in INSTALLED if backend != "tensorflow"]
# The first step's logits: float32 from one set of weights, kernels that differ in their last bits.
LOGITS_TOLERANCE = 1e-5


def greedy(outputs, backend, key):
    return probe_output(outputs, backend, f"generation_greedy.{key}")


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_greedy_tokens_of_a_mixed_length_batch_equal_tensorflow_s(backend_outputs, backend, mode):
    tokens = greedy(backend_outputs, backend, f"{mode}_token_ids")
    np.testing.assert_array_equal(tokens, greedy(backend_outputs, "tensorflow", f"{mode}_token_ids"))
    np.testing.assert_array_equal(greedy(backend_outputs, backend, f"{mode}_padding_mask"),
                                  greedy(backend_outputs, "tensorflow", f"{mode}_padding_mask"))
    # Each prompt from column 0, however it was padded, and continued to the width.
    for row, prompt in enumerate(ID_PROMPTS):
        assert tokens[row, :len(prompt)].tolist() == prompt
    assert greedy(backend_outputs, backend, f"{mode}_padding_mask").all()
    np.testing.assert_allclose(greedy(backend_outputs, backend, f"{mode}_first_step_logits"),
                               greedy(backend_outputs, "tensorflow", f"{mode}_first_step_logits"),
                               atol=LOGITS_TOLERANCE, rtol=0)


def test_the_two_modes_and_the_rows_give_different_tokens(backend_outputs):
    """The probe's model is far from uniform: the equalities above compare real continuations."""
    exact = greedy(backend_outputs, "tensorflow", "exact_token_ids")
    cached = greedy(backend_outputs, "tensorflow", "cached_token_ids")
    assert (exact != cached).any()
    assert len({tuple(row[len(p):]) for row, p in zip(exact, ID_PROMPTS)}) == len(ID_PROMPTS)


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_string_prompts_give_tensorflow_s_continuations(backend_outputs, backend, mode):
    texts = greedy(backend_outputs, backend, f"{mode}_texts")
    np.testing.assert_array_equal(texts, greedy(backend_outputs, "tensorflow", f"{mode}_texts"))
    assert all(len(text) > 0 for text in texts.tolist())


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_a_stop_token_and_strip_prompt_give_tensorflow_s_outputs(backend_outputs, backend):
    stop = int(greedy(backend_outputs, "tensorflow", "stop_token"))
    assert int(greedy(backend_outputs, backend, "stop_token")) == stop
    for key in ("stopped_token_ids", "stopped_padding_mask", "stripped_token_ids", "stripped_padding_mask"):
        np.testing.assert_array_equal(greedy(backend_outputs, backend, key),
                                      greedy(backend_outputs, "tensorflow", key), err_msg=key)
    # Each row ends with its first new stop token or its budget of new tokens, whichever comes first; a
    # prompt holding the stop id is not cut.
    tokens, mask = greedy(backend_outputs, backend, "stopped_token_ids"), greedy(backend_outputs, backend,
                                                                                  "stopped_padding_mask")
    full = greedy(backend_outputs, backend, "exact_token_ids")
    assert tokens.shape == (len(ID_PROMPTS), WIDTH + NEW_TOKENS)
    stopped_rows = 0
    for row, prompt in enumerate(ID_PROMPTS):
        new = full[row, len(prompt):len(prompt) + NEW_TOKENS].tolist()
        stopped_rows += stop in new
        kept = len(prompt) + (new.index(stop) + 1 if stop in new else NEW_TOKENS)
        assert mask[row].tolist() == [True] * kept + [False] * (WIDTH + NEW_TOKENS - kept)
        np.testing.assert_array_equal(tokens[row, :kept], full[row, :kept])
    assert 0 < stopped_rows < len(ID_PROMPTS)  # The stop token ended a row, not every row.
    stripped = greedy(backend_outputs, backend, "stripped_token_ids")
    stripped_mask = greedy(backend_outputs, backend, "stripped_padding_mask")
    for row, prompt in enumerate(ID_PROMPTS):
        assert stripped[row][stripped_mask[row]].tolist() == tokens[row][mask[row]][len(prompt):].tolist()


def sampling(outputs, backend, key):
    return probe_output(outputs, backend, f"generation_sampling.{key}")


@pytest.mark.parametrize("backend", INSTALLED)
def test_seeded_top_k_generation_repeats_per_seed_and_carries_its_seed_state(backend_outputs, backend):
    assert str(sampling(backend_outputs, backend, "generate_sampler")) == "SeededTopKSampler"
    first, again = (sampling(backend_outputs, backend, f"generate_{key}") for key in ("seed7", "seed7_again"))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(sampling(backend_outputs, backend, "generate_seed7_next"),
                                  sampling(backend_outputs, backend, "generate_seed7_again_next"))
    # The state moves on after a call (assigned back from JAX's compiled loop), and the seed matters.
    assert (sampling(backend_outputs, backend, "generate_seed7_next") != first).any()
    assert (sampling(backend_outputs, backend, "generate_seed8") != first).any()
    for row, prompt in enumerate(ID_PROMPTS):
        assert first[row, :len(prompt)].tolist() == prompt


@pytest.mark.parametrize("backend", INSTALLED)
@pytest.mark.parametrize("name", SAMPLERS)
def test_each_seeded_sampler_draws_the_same_tokens_for_a_seed_inside_its_support(backend_outputs, backend, name):
    first = sampling(backend_outputs, backend, f"{name}_seed7")
    np.testing.assert_array_equal(first, sampling(backend_outputs, backend, f"{name}_seed7_again"))
    assert (sampling(backend_outputs, backend, f"{name}_seed8") != first).mean() > 0.3
    probabilities = sampling(backend_outputs, backend, "probabilities")
    ranks = (probabilities > np.take_along_axis(probabilities, first[:, None], axis=1)).sum(axis=1)
    if name == "top_k":
        assert ranks.max() < 20
    if name == "top_p":  # Inside the nucleus: the tokens more probable than it hold less than p.
        mass = np.where(probabilities > np.take_along_axis(probabilities, first[:, None], axis=1), probabilities, 0)
        assert (mass.sum(axis=1) < 0.9).all()
    assert ranks.max() > 0  # Not greedy in disguise.
