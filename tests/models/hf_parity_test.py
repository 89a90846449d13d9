"""Numerical parity with Hugging Face's PyTorch XLNet, from fixtures (no torch needed).

`tests/testdata/hf_parity/<case>/` holds a random tiny Hugging Face checkpoint
and everything the PyTorch model returned for it (see tools/make_hf_fixtures.py).
Each case is converted with the `transformers` converter and must reproduce the
logits, every layer's content-stream (and query-stream) hidden state and the new
memory within 1e-4; multi-segment cases feed segment k the memory our model
produced for segment k-1.
"""

import os

import numpy as np
import pytest

from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
from xlnet_tf.models.xlnet_backbone import XLNetBackbone

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity")
CASES = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d)))
INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask", "perm_mask", "target_mapping", "mems")
TOLERANCE = 1e-4

pytestmark = pytest.mark.parity


def load_segments(case):
    """The fixture's segments as a list of (inputs, expected outputs) dicts."""
    data = np.load(os.path.join(FIXTURES, case, "io.npz"))
    segments = []
    for k in range(int(data["num_segments"])):
        prefix = f"seg{k}_"
        values = {key[len(prefix):]: data[key] for key in data.files if key.startswith(prefix)}
        inputs = {key: values.pop(key) for key in INPUT_KEYS if key in values}
        segments.append((inputs, values))
    return segments


def truncated_backbone(backbone, num_layers):
    """A backbone made of the first `num_layers` blocks of `backbone`, sharing its weight values.

    Its `sequence_output` / `query_output` are the hidden states after layer
    `num_layers` of the full model, which is how the tests reach every layer
    through the public API.
    """
    config = backbone.config
    small = XLNetBackbone(config.replace(num_layers=num_layers))
    small.token_embedding.embeddings.assign(backbone.token_embedding.embeddings)
    small.mask_embedding.assign(backbone.mask_embedding)
    for name in ("content_attention_bias", "positional_attention_bias", "segment_attention_bias"):
        value = np.asarray(getattr(backbone, name))
        getattr(small, name).assign(value[:num_layers] if config.untie_relative_bias else value)
    small.segment_embedding.assign(np.asarray(backbone.segment_embedding)[:num_layers])
    for source, target in zip(backbone.blocks, small.blocks):
        target.set_weights(source.get_weights())
    return small


def max_diff(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    return float(np.max(np.abs(actual - expected)))


@pytest.fixture(scope="module")
def converted():
    cache = {}

    def get(case):
        if case not in cache:
            cache[case], _, _ = convert_transformers_checkpoint(os.path.join(FIXTURES, case))
        return cache[case]

    return get


def test_fixtures_cover_the_required_cases():
    assert set(CASES) >= {"content_left_pad", "two_stream", "mems", "mems_reuse", "bi_data",
                          "uni_same_length", "clamp_len", "tied_relu", "gelu"}


@pytest.mark.parametrize("case", CASES)
def test_logits_and_new_mems_match_hugging_face(case, converted):
    pretrainer = converted(case)
    memory = None
    for k, (inputs, expected) in enumerate(load_segments(case)):
        if k > 0:
            inputs = dict(inputs, mems=memory)  # Our own memory from the previous segment.
        outputs = pretrainer(inputs, training=False)
        assert max_diff(outputs["logits"], expected["logits"]) <= TOLERANCE, (case, k, "logits")
        assert max_diff(outputs["sequence_output"], expected["hidden_states"][-1]) <= TOLERANCE
        if "query_hidden_states" in expected:
            assert max_diff(outputs["query_output"], expected["query_hidden_states"][-1]) <= TOLERANCE
        if "new_mems" in expected:
            assert max_diff(outputs["new_mems"], expected["new_mems"]) <= TOLERANCE, (case, k, "new_mems")
            memory = outputs["new_mems"]
        else:
            assert "new_mems" not in outputs


@pytest.mark.parametrize("case", CASES)
def test_every_layer_hidden_state_matches_hugging_face(case, converted):
    backbone = converted(case).backbone
    num_layers = backbone.config.num_layers
    smalls = [truncated_backbone(backbone, n) for n in range(1, num_layers)]
    memory = None
    for k, (inputs, expected) in enumerate(load_segments(case)):
        if k > 0:
            inputs = dict(inputs, mems=memory)
        # Layer 0 is the embedding output (the query stream starts from mask_emb).
        embeddings = np.asarray(backbone.token_embedding(inputs["token_ids"]))
        assert max_diff(embeddings, expected["hidden_states"][0]) <= TOLERANCE
        if "query_hidden_states" in expected:
            query = np.broadcast_to(np.asarray(backbone.mask_embedding), expected["query_hidden_states"][0].shape)
            assert max_diff(query, expected["query_hidden_states"][0]) <= TOLERANCE
        for n, small in enumerate(smalls, start=1):
            small_inputs = dict(inputs)
            if "mems" in small_inputs:
                small_inputs["mems"] = np.asarray(small_inputs["mems"])[:, :n]
            outputs = small(small_inputs, training=False)
            diff = max_diff(outputs["sequence_output"], expected["hidden_states"][n])
            assert diff <= TOLERANCE, (case, k, f"content layer {n}", diff)
            if "query_hidden_states" in expected:
                diff = max_diff(outputs["query_output"], expected["query_hidden_states"][n])
                assert diff <= TOLERANCE, (case, k, f"query layer {n}", diff)
        memory = backbone(inputs, training=False).get("new_mems")
