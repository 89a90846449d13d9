"""The `keras.distribution` strategy names on TensorFlow: one config runs on either backend."""

import pytest
import tensorflow as tf

from xlnet_tf.training.run_sections import DistributionSection, TrainingSection
from xlnet_tf.training.run_setup import RunSetup
from xlnet_tf.training.strategy import STRATEGIES, StrategyError, resolve_strategy


def test_every_backend_reads_the_same_names():
    assert {"data_parallel", "model_parallel", "cpu"} <= set(STRATEGIES)


def test_data_parallel_is_mirrored_and_cpu_is_one_cpu_device(two_cpu_devices):
    data_parallel = resolve_strategy("data_parallel")
    assert isinstance(data_parallel, tf.distribute.MirroredStrategy)
    assert data_parallel.num_replicas_in_sync == resolve_strategy("mirrored").num_replicas_in_sync
    cpu = resolve_strategy("cpu")
    assert isinstance(cpu, tf.distribute.OneDeviceStrategy)
    assert cpu.extended.worker_devices[0].endswith("CPU:0")
    setup = RunSetup.resolve(DistributionSection(strategy="cpu"), TrainingSection(global_batch_size=8))
    assert setup.backend == "tensorflow" and setup.devices["device_kind"] == "CPU"
    assert setup.per_process_batch_size == 8


def test_model_parallel_needs_jax_in_one_line():
    with pytest.raises(StrategyError) as error:
        resolve_strategy("model_parallel")
    assert "\n" not in str(error.value) and "--backend jax" in str(error.value)
