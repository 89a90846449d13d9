"""On every backend, the converted Hugging Face parity fixtures give Hugging Face's PyTorch outputs within the
tolerance that TensorFlow meets (`tests/models/hf_parity_test.py`: 1e-4)."""

import pytest

from tests.backends.backend_harness import BACKENDS, backend_available, probe_output
from tests.models.hf_parity_test import CASES, TOLERANCE, load_segments

INSTALLED = [backend for backend in BACKENDS if backend_available(backend)]
# Fixture key of each output: the last layer's hidden states are the backbone's outputs.
EXPECTED = {"logits": lambda e: e["logits"], "sequence_output": lambda e: e["hidden_states"][-1],
            "query_output": lambda e: e["query_hidden_states"][-1], "new_mems": lambda e: e["new_mems"]}
PRESENT = {"logits": "logits", "sequence_output": "hidden_states", "query_output": "query_hidden_states",
           "new_mems": "new_mems"}


@pytest.mark.parametrize("backend", INSTALLED)
@pytest.mark.parametrize("case", CASES)
def test_each_backend_gives_hugging_face_s_outputs(backend_outputs, backend, case):
    compared = 0
    for k, (_, expected) in enumerate(load_segments(case)):
        for output, fixture_key in PRESENT.items():
            if fixture_key not in expected:
                continue
            actual = probe_output(backend_outputs, backend, f"hf_parity.{case}.seg{k}.{output}")
            reference = EXPECTED[output](expected)
            assert actual.shape == reference.shape, (case, k, output, actual.shape, reference.shape)
            difference = float(abs(actual - reference).max())
            assert difference <= TOLERANCE, (backend, case, k, output, difference)
            compared += 1
    assert compared >= 2
