"""Shared test settings: Keras on TensorFlow, quiet logs, tiny configs."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")


@pytest.fixture
def testdata_dir():
    return TESTDATA


@pytest.fixture(autouse=True)
def _reset_dtype_policy():
    """A test that switches to mixed precision must not leak it into the next one."""
    import keras

    yield
    keras.config.set_dtype_policy("float32")
