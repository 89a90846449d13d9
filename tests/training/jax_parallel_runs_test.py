"""On 8 simulated CPU devices (JAX): DataParallel and a 2x4 ModelParallel train as one device does.

Each check runs in a fresh process (`tests/training/jax_parallel_runs.py`), since JAX
reads `XLA_FLAGS=--xla_force_host_platform_device_count=8` and the backend when it
starts. The same global batch of 16, the same initial weights, dropout 0: the
per-step losses agree within 1e-5.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.backends.backend_harness import backend_available

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = 1e-5

# JAX is a test extra; a venv without it (CI's Python 3.13 pass) has nothing to run here.
pytestmark = pytest.mark.skipif(not backend_available("jax"), reason="JAX is not installed")


def _run(tmp_path, *checks, timeout=1200, backend="jax"):
    output = str(tmp_path / f"{backend}.json")
    env = dict(os.environ, KERAS_BACKEND=backend, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu")
    process = subprocess.run([sys.executable, "-m", "tests.training.jax_parallel_runs", output, *checks], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=timeout)
    assert process.returncode == 0, process.stderr[-3000:]
    with open(output) as f:
        results = json.load(f)
    for check in checks:
        assert "error" not in results[check], results[check].get("traceback")
    return results


def _assert_same_losses(results, steps, learns=True):
    reference = np.asarray(results["cpu"]["losses"])
    assert len(reference) == steps and np.all(np.isfinite(reference))
    assert results["cpu"]["replicas"] == 1
    assert results["data_parallel"]["replicas"] == 8 and results["model_parallel"]["replicas"] == 2
    for name in ("data_parallel", "model_parallel"):
        np.testing.assert_allclose(results[name]["losses"], reference, rtol=0, atol=TOLERANCE, err_msg=name)
    if learns:
        assert reference[-1] < reference[0]  # Real updates between the compared steps.


def test_keras_model_trains_alike_on_one_device_data_and_model_parallel(tmp_path):
    results = _run(tmp_path, "keras")["keras"]
    _assert_same_losses(results, steps=4)
    assert results["data_parallel"]["strategy"] == "DataParallel"
    assert results["model_parallel"]["strategy"] == "ModelParallel 2x4"
    # The first feed-forward kernel [8, 32] is split along its width over the model axis.
    assert "P(None, 'model')" in results["model_parallel"]["kernel_sharding"]


@pytest.mark.large
def test_pretraining_on_8_devices_equals_one_device(tmp_path):
    results = _run(tmp_path, "pretrain")["pretrain"]
    _assert_same_losses(results, steps=6)
    # The recurrence memory follows the batch: each device holds the memory of its rows.
    for name in ("data_parallel", "model_parallel"):
        assert results[name]["memory_spec"].startswith("P('batch'"), results[name]["memory_spec"]


@pytest.mark.large
def test_finetuning_on_8_devices_equals_one_device(tmp_path):
    results = _run(tmp_path, "finetune")["finetune"]
    # Six steps of a two-class head move the loss by less than their batches do: no learning check here.
    _assert_same_losses(results, steps=6, learns=False)


@pytest.mark.large
def test_kill_and_resume_on_8_devices_gives_the_uninterrupted_weights(tmp_path):
    results = _run(tmp_path, "resume")["resume"]
    assert results["killed"]
    # Steps 1-3 logged before the kill, 4-6 after the resume: the uninterrupted run's losses.
    assert results["steps"] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(results["losses"], results["reference_losses"], rtol=0, atol=TOLERANCE)
    assert results["max_weight_difference"] <= 1e-6
    # The other callbacks of the run, on JAX: weight checkpoints and TensorBoard events. The kill came in
    # the backup of epoch 1, before that epoch's checkpoint: the resumed run wrote the final one.
    assert results["checkpoints"] == ["ckpt-00000006.weights.h5"]
    assert results["tensorboard_files"] >= 1


@pytest.mark.large
def test_bi_data_on_jax_splits_each_replica_as_tensorflow_does(tmp_path):
    """8 replicas on each backend, the same preset and records: TensorFlow's MirroredStrategy and
    JAX's DataParallel give every row the same direction, and so the same losses."""
    tensorflow = _run(tmp_path, "bi_data", backend="tensorflow")["bi_data"]
    jax = _run(tmp_path, "bi_data")["bi_data"]
    assert tensorflow["replicas"] == jax["replicas"] == 8
    np.testing.assert_allclose(jax["losses"], tensorflow["losses"], rtol=0, atol=TOLERANCE)
