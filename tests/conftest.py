"""Shared test settings: Keras on TensorFlow, quiet logs, two logical CPU devices, no leaked dtype policy.

The helpers themselves (tiny config and inputs, `run_layer_test` and the other checks, the
record writer) are in `tests/harness.py`; see `tests/README.md`.
"""

import importlib.util
import os

# Without TensorFlow (the no-TensorFlow CI pass) the package picks its own backend.
HAS_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None
if HAS_TENSORFLOW:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")


def pytest_configure(config):
    """Splits the CPU into two logical devices before any test module or test touches TensorFlow.

    pytest runs this before collecting (importing) the test modules, in every process that
    runs tests (each xdist worker too), so the split does not depend on which module
    TensorFlow meets first. The xdist controller runs no test and skips the TensorFlow import.
    """
    is_xdist_controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if HAS_TENSORFLOW and not is_xdist_controller:
        from tests.harness import split_cpu_devices

        split_cpu_devices()


@pytest.fixture(scope="session")
def two_cpu_devices():
    """The names of two logical CPU devices, for MirroredStrategy tests; fails (never skips) without them."""
    from tests.harness import assert_two_cpu_devices

    return assert_two_cpu_devices()


@pytest.fixture
def testdata_dir():
    return TESTDATA


@pytest.fixture(autouse=True)
def _reset_dtype_policy():
    """A test that switches to mixed precision must not leak it into the next one."""
    import keras

    yield
    keras.config.set_dtype_policy("float32")
