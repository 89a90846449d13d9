"""Resolution of `keras.distribution` on JAX: a faked TPU runtime, a TPU JAX cannot use, a laptop, the pipeline.

JAX's devices are replaced by `FakeChip`s (what `jax.devices()` lists on a TPU VM:
platform "tpu", a device kind, a process index) and the machine by a faked TPU VM
folder, as `tpu_vm_strategy_test.py` fakes TensorFlow's. The runs on 8 simulated
CPU devices are in `jax_parallel_runs_test.py`.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.training import jax_distribution
from xlnet_tf.training.jax_distribution import KerasDistributionStrategy, resolve_jax_distribution
from xlnet_tf.training.strategy import StrategyError, devices_line, resolve_batch_sizes
from xlnet_tf.training.tpu_host import TpuHost


@dataclasses.dataclass(frozen=True)
class FakeChip:
    """What `jax.devices()` lists for one chip (or CPU device)."""

    id: int
    platform: str = "tpu"
    device_kind: str = "TPU v5 lite"
    process_index: int = 0


def _tpu_vm(tmp_path, chips=8, accelerator="v5litepod-8"):
    (tmp_path / "dev" / "vfio").mkdir(parents=True)
    for i in range(chips):
        (tmp_path / "dev" / "vfio" / str(i)).touch()
    return TpuHost.detect(environ={"TPU_ACCELERATOR_TYPE": accelerator, "TPU_WORKER_ID": "0"},
                          root=str(tmp_path), find_libtpu=lambda: "/opt/libtpu")


@pytest.fixture
def jax_sees(monkeypatch):
    """`jax_sees(devices)`: JAX lists `devices` (or raises them when an exception); one process."""
    def install(devices):
        def listed(platform=None):
            if isinstance(devices, Exception):
                raise devices
            return [d for d in devices if platform is None or d.platform == platform]

        monkeypatch.setattr(jax_distribution, "_jax_devices", listed)
        monkeypatch.setattr(jax_distribution, "_process_info", lambda: (1, 0))
        monkeypatch.setattr(jax_distribution, "_initialized", True)  # No cluster to join.

    return install


def test_a_faked_tpu_runtime_resolves_to_its_chips(tmp_path, jax_sees):
    host = _tpu_vm(tmp_path)
    jax_sees([FakeChip(i) for i in range(8)])
    placement = resolve_jax_distribution("auto", tpu_host=host)
    assert placement.num_replicas_in_sync == 8
    assert [d.id for d in placement.distribution.device_mesh.devices] == list(range(8))
    assert placement.describe() == {"backend": "jax", "strategy": "DataParallel", "replicas": 8,
                                    "device_kind": "TPU v5litepod-8"}
    assert devices_line(placement.describe()) == "Devices: jax, DataParallel, 8 replicas, TPU v5litepod-8."
    tpu = resolve_jax_distribution("tpu", tpu_host=host)
    assert tpu.num_replicas_in_sync == 8
    mesh = resolve_jax_distribution("model_parallel", tpu_host=host).distribution.device_mesh
    assert (mesh.shape, mesh.axis_names) == ((2, 4), ("batch", "model"))


def test_one_chip_trains_without_a_distribution(tmp_path, jax_sees):
    jax_sees([FakeChip(0)])
    placement = resolve_jax_distribution("auto", tpu_host=_tpu_vm(tmp_path, chips=1, accelerator="v5litepod-1"))
    assert placement.distribution is None and placement.num_replicas_in_sync == 1
    assert placement.describe()["device_kind"] == "TPU v5litepod-1"


def test_tpu_chips_without_jax_tpu_support_fail_in_one_line(tmp_path, jax_sees):
    host = _tpu_vm(tmp_path)
    jax_sees([FakeChip(0, platform="cpu", device_kind="cpu")])
    for name in ("auto", "data_parallel", "tpu"):
        with pytest.raises(StrategyError) as error:
            resolve_jax_distribution(name, tpu_host=host)
        message = str(error.value)
        assert "\n" not in message and "TPU chips" in message and "jax[tpu]" in message, message
    # A mismatched libtpu: JAX fails to start the TPU backend.
    jax_sees(RuntimeError("Unable to initialize backend 'tpu': UNIMPLEMENTED: libtpu version mismatch\nmore"))
    with pytest.raises(StrategyError) as error:
        resolve_jax_distribution("auto", tpu_host=host)
    assert "\n" not in str(error.value) and "libtpu version mismatch" in str(error.value)


def test_a_laptop_stays_on_its_cpu(jax_sees):
    jax_sees([FakeChip(i, platform="cpu", device_kind="cpu") for i in range(8)])
    for name in ("auto", "cpu", "one_device"):
        placement = resolve_jax_distribution(name, tpu_host=TpuHost())
        assert placement.distribution is None and placement.num_replicas_in_sync == 1, name
        assert devices_line(placement.describe()) == (
            "Devices: jax, SingleDevice, 1 replica, CPU: this run trains on the CPU (no TPU or GPU in use).")
    with pytest.raises(StrategyError, match="--strategy tpu .*no TPU found"):
        resolve_jax_distribution("tpu", tpu_host=TpuHost())
    # Asked for: the CPU devices replicate, as TensorFlow's virtual CPU devices do.
    assert resolve_jax_distribution("data_parallel", tpu_host=TpuHost()).num_replicas_in_sync == 8


def test_gpus_are_named_by_their_kind(jax_sees):
    jax_sees([FakeChip(i, platform="gpu", device_kind="NVIDIA H100 80GB HBM3") for i in range(2)])
    assert resolve_jax_distribution("auto", tpu_host=TpuHost()).describe() == {
        "backend": "jax", "strategy": "DataParallel", "replicas": 2, "device_kind": "GPU NVIDIA H100 80GB HBM3"}


def test_several_hosts_join_through_keras_initialize():
    calls = []
    jax_distribution._initialized = False
    try:
        assert not jax_distribution.initialize_cluster({}, TpuHost(), initialize=lambda: calls.append(1))
        assert jax_distribution.initialize_cluster(
            {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:1234",
             "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": "1"},
            TpuHost(), initialize=lambda: calls.append(1))
        assert calls == [1]
        # Once per process.
        assert not jax_distribution.initialize_cluster({"JAX_COORDINATOR_ADDRESS": "h:1"}, TpuHost(),
                                                       initialize=lambda: calls.append(1))
    finally:
        jax_distribution._initialized = False
    assert jax_distribution.cluster_requested({}, TpuHost(variables=(("TPU_WORKER_HOSTNAMES", "w0,w1"),)))


def test_model_parallel_layout_splits_heads_width_and_vocabulary(jax_sees):
    from tests.harness import tiny_config

    jax_sees([FakeChip(i) for i in range(8)])
    mesh = resolve_jax_distribution("model_parallel", tpu_host=TpuHost()).distribution.device_mesh
    layout = jax_distribution.backbone_layout_map(mesh, tiny_config(num_heads=4, head_dim=2, vocabulary_size=40))
    assert layout["xlnet_backbone/block_1/attention/query_kernel"].axes == (None, "model", None)
    assert layout["xlnet_backbone/block_0/attention/output_kernel"].axes == (None, "model", None)
    assert layout["xlnet_backbone/block_0/feedforward_intermediate/kernel"].axes == (None, "model")
    assert layout["xlnet_backbone/block_0/feedforward_output/kernel"].axes == ("model", None)
    assert layout["xlnet_backbone/token_embedding/embeddings"].axes == ("model", None)
    assert layout["recurrence_memory"].axes == ("batch", None, None, None)
    assert layout["recurrence_memory_step"] is None and layout["xlnet_backbone/mask_embedding"] is None
    # 2 heads do not split over 4 devices: kept whole.
    odd = jax_distribution.backbone_layout_map(mesh, tiny_config(num_heads=2))
    assert odd["xlnet_backbone/block_0/attention/key_kernel"].axes == (None, None, None)


def _replica_batches(input_context, batches=8, global_batch=16):
    """Per-replica batches numbered by the pipeline: row value = batch index * 100 + row, `[b, 1]`."""
    size = input_context.get_per_replica_batch_size(global_batch)
    values = (np.arange(batches)[:, None] * 100 + np.arange(size)[None, :]).astype("int32")  # [batches, b]
    return tf.data.Dataset.from_tensor_slices({"x": values[:, :, None]})  # batches of [b, 1]


def test_the_pipeline_stacks_replica_batches_as_tensorflow_hands_them_out():
    placement = KerasDistributionStrategy(None, replicas=4, processes=(1, 0), devices={})
    first = next(iter(placement.distribute_datasets_from_function(_replica_batches)))["x"][:, 0].numpy()
    # Replica r of step 0 gets the pipeline's batch r (rows 0..3 of it).
    np.testing.assert_array_equal(first, [0, 1, 2, 3, 100, 101, 102, 103, 200, 201, 202, 203, 300, 301, 302, 303])
    bi = next(iter(placement.distribute_datasets_from_function(_replica_batches, bi_data=True)))["x"][:, 0].numpy()
    # Every replica's forward half (its first two rows) first, then every backward half.
    np.testing.assert_array_equal(bi, [0, 1, 100, 101, 200, 201, 300, 301, 2, 3, 102, 103, 202, 203, 302, 303])
    assert placement.distribute_datasets_from_function(_replica_batches).element_spec["x"].shape[0] == 16


def test_bi_data_over_several_processes_is_refused():
    placement = KerasDistributionStrategy(None, replicas=8, processes=(2, 0), devices={})
    with pytest.raises(StrategyError, match="bi_data on JAX with 2 processes"):
        placement.distribute_datasets_from_function(_replica_batches, bi_data=True)
    with pytest.raises(StrategyError, match="global_batch_size 12 does not divide evenly over 8 replicas"):
        resolve_batch_sizes(global_batch_size=12, per_replica_batch_size_value=None,
                            num_replicas=placement.num_replicas_in_sync, num_processes=placement.num_processes)
    # A (batch, model) mesh over 4 hosts with 2 batch replicas: each host reads a share of the batch.
    with pytest.raises(StrategyError, match="global_batch_size 6 does not divide evenly over 4 processes; "
                                            "use a multiple of 4"):
        resolve_batch_sizes(global_batch_size=6, per_replica_batch_size_value=None, num_replicas=2, num_processes=4)
    assert resolve_batch_sizes(global_batch_size=8, per_replica_batch_size_value=None, num_replicas=2,
                               num_processes=4) == (8, 4)
