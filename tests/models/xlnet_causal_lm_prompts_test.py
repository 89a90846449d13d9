"""`XLNetCausalLM.generate`'s inputs: every row's budget as alone, and one check of every prompt on every path."""

import os

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import XLNetCausalLMPreprocessor
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
VOCABULARY = 200  # tiny_spiece.model's
SEQUENCE_LENGTH = 12
ID_PROMPTS = [[11, 12, 13, 14, 15], [21], [31, 32, 33]]
TEXT_PROMPTS = ["a fine", "a", "the dog"]  # 3, 1 and 5 tokens


@pytest.fixture(scope="module")
def model():
    """A tiny generator with a preprocessor, run eagerly: calls of many shapes, none traced."""
    keras.utils.set_random_seed(5)
    # Large weights: a random model far from uniform, whose continuations differ per prompt.
    backbone = XLNetBackbone(tiny_config(vocabulary_size=VOCABULARY, initializer_range=0.5))
    causal_lm = XLNetCausalLM(backbone, XLNetCausalLMPreprocessor(XLNetTokenizer(SPIECE),
                                                                  sequence_length=SEQUENCE_LENGTH))
    causal_lm.lm_bias.assign(np.random.default_rng(0).normal(0, 1, VOCABULARY))
    causal_lm.run_eagerly = True
    return causal_lm


def id_batch(prompts, width):
    """Id prompts in `width` columns, laid out on both sides: even rows left-padded, odd rows right-padded."""
    ids, mask = np.full((len(prompts), width), 5, np.int32), np.zeros((len(prompts), width), np.int32)
    for row, prompt in enumerate(prompts):
        columns = slice(width - len(prompt), width) if row % 2 == 0 else slice(0, len(prompt))
        ids[row, columns], mask[row, columns] = prompt, 1
    return {"token_ids": ids, "padding_mask": mask}


def rows(out):
    """Each row's tokens under its `padding_mask`."""
    return [ids[mask].tolist() for ids, mask in zip(out["token_ids"], out["padding_mask"])]


def batch_and_alone(model, prompts, make_input, **kwargs):
    together = model.generate(make_input(prompts), stop_token_ids=None, **kwargs)
    alone = [model.generate(make_input([prompt]), stop_token_ids=None, **kwargs) for prompt in prompts]
    return together, alone


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "cached"])
def test_mixed_length_id_batch_gives_every_prompt_its_tokens_and_budget_alone(model, mode):
    """Prompts of 5, 1 and 3 ids together: each gets the tokens it gets alone, to `max_length` or `max_new_tokens`."""
    width = 7
    together, alone = batch_and_alone(model, ID_PROMPTS, lambda p: id_batch(p, width), mode=mode)
    assert rows(together) == [rows(out)[0] for out in alone]
    assert [len(r) for r in rows(together)] == [width] * 3  # Each row to T, its own prompt included.
    assert len({tuple(r[len(p):len(p) + 2]) for r, p in zip(rows(together), ID_PROMPTS)}) == 3  # Not one answer.
    together, alone = batch_and_alone(model, ID_PROMPTS, lambda p: id_batch(p, width), mode=mode, max_new_tokens=3)
    assert together["token_ids"].shape == (3, width + 3)
    assert rows(together) == [rows(out)[0] for out in alone]
    assert [len(r) for r in rows(together)] == [len(p) + 3 for p in ID_PROMPTS]
    # max_length holds for ids too: every row fills it.
    together = model.generate(id_batch(ID_PROMPTS, width), max_length=6, stop_token_ids=None, mode=mode)
    assert together["token_ids"].shape == (3, 6) and together["padding_mask"].all()
    model.mode = "exact"


@pytest.mark.slow
def test_mixed_length_string_batch_gives_every_prompt_its_continuation_alone(model):
    for budget in ({"max_length": 8}, {"max_new_tokens": 2}):
        together, alone = batch_and_alone(model, TEXT_PROMPTS, list, strip_prompt=True, **budget)
        assert together == [out[0] for out in alone]
        assert len(set(together)) == 3


@pytest.mark.slow
def test_beam_search_in_a_mixed_batch_equals_beam_search_alone(model):
    beam = keras_hub.samplers.BeamSampler(num_beams=2)
    together, alone = batch_and_alone(model, ID_PROMPTS, lambda p: id_batch(p, 5), max_new_tokens=2, sampler=beam)
    assert rows(together) == [rows(out)[0] for out in alone]
    model.compile(sampler="greedy")


@pytest.mark.slow
def test_the_compiled_loop_is_traced_once_per_batch_shape_and_equals_eager(model):
    """Other prompt lengths in the same shape run the same trace; graph and eager give the same tokens."""
    model.run_eagerly = False
    try:
        first = model.generate(id_batch(ID_PROMPTS, 6), max_new_tokens=2, stop_token_ids=None)
        second = model.generate(id_batch([[40, 41], [42, 43, 44, 45, 46, 47], [48]], 6), max_new_tokens=2,
                                stop_token_ids=None)
        assert model.generate_function.experimental_get_tracing_count() == 1
    finally:
        model.run_eagerly = True
    assert rows(first) == rows(model.generate(id_batch(ID_PROMPTS, 6), max_new_tokens=2, stop_token_ids=None))
    assert [len(r) for r in rows(second)] == [4, 8, 3]


@pytest.mark.slow
def test_a_dataset_s_prompts_are_checked_as_direct_ones_naming_the_prompt_across_batches(model):
    def dataset(texts):
        return tf.data.Dataset.from_tensor_slices(texts).batch(2)

    assert model.generate(dataset(TEXT_PROMPTS), max_new_tokens=2, stop_token_ids=None) == model.generate(
        TEXT_PROMPTS, max_new_tokens=2, stop_token_ids=None)
    with pytest.raises(ValueError, match=r"prompt 2 is empty \(no tokens\)"):
        model.generate(dataset(["a", "a", "   "]), max_new_tokens=1)
    long = "the quick brown fox jumps over the lazy dog"  # 26 tokens, cut to 12 by the preprocessor
    with pytest.raises(ValueError, match=r"prompt 1 has at least 12 tokens, which leaves no room to generate within "
                                         r"max_length 12 \(the preprocessor's sequence_length\)"):
        model.generate(dataset(["a", long]))
    with pytest.raises(ValueError, match=r"prompt 3 has at least 13 tokens, more than the 12 that the "
                                         r"preprocessor's sequence_length allows a prompt"):
        model.generate(dataset(["a", "a", "a", long]), max_new_tokens=1)
    ids = id_batch(ID_PROMPTS, 6)
    ids["token_ids"][2, -1] = VOCABULARY
    with pytest.raises(ValueError, match=r"token_ids values must be in \[0, 200\) \(the vocabulary size\); got 200 at "
                                         r"row 2, column 5\."):
        model.generate(tf.data.Dataset.from_tensor_slices(ids).batch(2), stop_token_ids=None)


@pytest.mark.parametrize("name", ["max_length", "max_new_tokens"])
@pytest.mark.parametrize("value", [0, -3, 2.5, True, "8"])
def test_a_budget_that_is_not_a_positive_int_is_refused_by_name(model, name, value):
    with pytest.raises(ValueError, match=rf"{name} must be an int >= 1 \(or None\), got {value!r}"):
        model.generate("a", **{name: value})


def test_max_length_and_max_new_tokens_together_are_refused(model):
    with pytest.raises(ValueError, match=r"give max_length \(8, each prompt plus its continuation\) or "
                                         r"max_new_tokens \(3, the continuation alone\), not both"):
        model.generate("a", max_length=8, max_new_tokens=3)


def test_an_empty_stop_list_means_no_stop_token_and_a_padding_id_stops_nothing(model):
    ids = id_batch(ID_PROMPTS, 6)
    expected = rows(model.generate(ids, stop_token_ids=None))
    assert rows(model.generate(ids, stop_token_ids=[])) == expected
    # Id 0 is no token the model draws here: as a stop token it must end no row early.
    assert all(0 not in row for row in expected)
    assert rows(model.generate(ids, stop_token_ids=[0])) == expected


@pytest.mark.parametrize("stop_token_ids,message", [
    ([7, VOCABULARY], r"stop token id 200 is outside the vocabulary \[0, 200\)"),
    ([-1], r"stop token id -1 is outside the vocabulary \[0, 200\)"),
    (["7"], r"stop_token_ids must be ids \(ints\), got '7' in \['7'\]"),
    (7, r"stop_token_ids must be 'auto', None or a list of ids, got 7; for one id, pass a list of it"),
    ("none", r"stop_token_ids must be 'auto', None or a list of ids, got 'none'"),
])
def test_bad_stop_token_ids_are_refused(model, stop_token_ids, message):
    with pytest.raises(ValueError, match=message):
        model.generate("a", stop_token_ids=stop_token_ids)


@pytest.mark.parametrize("bad_id,column", [(VOCABULARY, 1), (-2, 0), (2 ** 40, 1)])
def test_id_prompts_outside_the_vocabulary_are_refused_naming_row_and_column(model, bad_id, column):
    ids = id_batch([[20, 21], [22, 23], [24]], 4)  # Row 1 is right-padded: its tokens are columns 0 and 1.
    ids["token_ids"] = ids["token_ids"].astype(np.int64)
    ids["token_ids"][1, column] = bad_id
    with pytest.raises(ValueError, match=rf"token_ids values must be in \[0, 200\) \(the vocabulary size\); got "
                                         rf"{bad_id} at row 1, column {column}\."):
        model.generate(ids, stop_token_ids=None)
    ids["token_ids"][1, 3] = bad_id  # Under padding: not a prompt token, never read.
    ids["token_ids"][1, column] = 30
    assert len(rows(model.generate(ids, stop_token_ids=None, max_new_tokens=1))[1]) == 3


@pytest.mark.parametrize("inputs,message", [
    ({"token_ids": np.array([[20, 21]])},
     r"an id prompt dict needs 'token_ids' and 'padding_mask' \[batch, length\] \(1 under each prompt token\); "
     r"'padding_mask' is missing \(got keys \['token_ids'\]\)"),
    ({"padding_mask": np.array([[1, 1]])}, r"'token_ids' is missing \(got keys \['padding_mask'\]\)"),
    ({"token_ids": np.array([[20, 21]]), "padding_mask": np.array([[1, 1]]), "segment_ids": np.array([[0, 0]])},
     r"an id prompt dict has only 'token_ids' and 'padding_mask'; got 'segment_ids' too"),
    ({"token_ids": np.array([[20, 21]]), "padding_mask": np.array([[1, 1, 0]])},
     r"token_ids and padding_mask must both be \[batch, length\], got shapes \(1, 2\) and \(1, 3\)"),
    ({"token_ids": np.array([[20.0, 21.0]]), "padding_mask": np.array([[1, 1]])},
     r"token_ids must be integer ids, got dtype float64"),
    ({"token_ids": np.array([[20, 21]]), "padding_mask": np.array([[1, 2]])},
     r"padding_mask must hold 0 and 1 \(or booleans\), got dtype int64 with values \[1, 2\]"),
    ({"token_ids": [[20, 21], [22]], "padding_mask": [[1, 1], [1]]},
     r"token_ids must be a \[batch, length\] array with rows of one length"),
])
def test_malformed_id_prompts_are_refused_naming_what_is_wrong(model, inputs, message):
    with pytest.raises(ValueError, match=message):
        model.generate(inputs, stop_token_ids=None)


def test_prompts_of_the_wrong_kind_are_refused(model):
    with pytest.raises(ValueError, match=r"this model has no preprocessor, so prompts are ids: a dict of 'token_ids' "
                                         r"and 'padding_mask' \[batch, length\]; got ndarray"):
        XLNetCausalLM(model.backbone).generate(np.array([[20, 21]]), stop_token_ids=None)
    with pytest.raises(ValueError, match=r"prompt 1 is of type int \(7\), not a string"):
        model.generate(["a", 7])
    with pytest.raises(ValueError, match=r"no prompts \(an empty batch\)"):
        model.generate([])
    with pytest.raises(ValueError, match=r"prompt 1 is empty \(no tokens\)"):
        model.generate(["a", "  \t "])


def test_an_unknown_sampler_name_is_refused_listing_the_names(model):
    with pytest.raises(ValueError, match=r"'gready' is not a sampler: pass a keras_hub.samplers.Sampler, its config, "
                                         r"or one of the names greedy, beam, contrastive, random, top_k, top_p"):
        model.generate("a", sampler="gready")
    assert model.generate("a", max_new_tokens=1, stop_token_ids=None)  # The model's sampler is unchanged.


def test_build_cache_moves_each_row_s_tokens_to_column_0_in_order(model):
    """Prompt tokens under any mask (holes included) move to the front in their order: the sort is stable by key."""
    rng = np.random.default_rng(3)
    mask = rng.random((6, 9)) < 0.5
    mask[:, 4] = True  # Every row has a token.
    ids = rng.integers(10, VOCABULARY, (6, 9))
    moved, _, start = model.build_cache(ids, mask.astype(np.int32))
    expected = np.zeros_like(ids)
    for row in range(len(ids)):
        expected[row, :mask[row].sum()] = ids[row][mask[row]]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(moved), expected)
    assert int(keras.ops.convert_to_numpy(start)) == mask.sum(axis=1).min()


def test_the_same_sampler_object_keeps_the_loop_and_its_seed_state(model):
    """A sampler passed again is not rebuilt (no new trace); its seed state carries on. A new object rebuilds."""
    sampler = keras_hub.samplers.TopKSampler(k=3, seed=1)
    ids = id_batch(ID_PROMPTS, 6)
    first = rows(model.generate(ids, max_new_tokens=3, stop_token_ids=None, sampler=sampler))
    loop, seeded = model.generate_function, model.sampler
    second = rows(model.generate(ids, max_new_tokens=3, stop_token_ids=None, sampler=sampler))
    assert model.generate_function is loop and model.sampler is seeded
    assert seeded.seed_generator is sampler.seed_generator
    assert first != second  # The state moved on: new draws.
    fresh = rows(model.generate(ids, max_new_tokens=3, stop_token_ids=None,
                                sampler=keras_hub.samplers.TopKSampler(k=3, seed=1)))
    assert model.generate_function is not loop and fresh == first  # Rebuilt, from the same seed.
    model.compile(sampler="greedy")


def test_a_preset_vocabulary_without_tensorflow_text_gives_ids_and_names_it_for_strings(model, tmp_path, monkeypatch):
    from xlnet_tf.models import xlnet_causal_lm

    preset = str(tmp_path / "generator")
    model.save_to_preset(preset)
    monkeypatch.setattr(xlnet_causal_lm, "tensorflow_available", lambda: False)
    loaded = XLNetCausalLM.from_preset(preset)
    assert loaded.preprocessor is None
    ids = id_batch(ID_PROMPTS, 6)
    assert rows(loaded.generate(ids, stop_token_ids=None)) == rows(model.generate(ids, stop_token_ids=None))
    with pytest.raises(ValueError, match=r"Attach an XLNetCausalLMPreprocessor for strings; this preset's vocabulary "
                                         r"is tokenized by TensorFlow Text, which is not installed \(pip install "
                                         r"tensorflow tensorflow-text\)\."):
        loaded.generate("a")
