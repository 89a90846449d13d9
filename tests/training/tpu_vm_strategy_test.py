"""Strategy resolution on a faked TPU VM, a TPU reached by name, and a machine without a TPU.

A TPU VM is faked in a temporary folder (`dev/accel0..3` or `dev/vfio/0`, and the variables
a TPU VM sets). TensorFlow's `TPUClusterResolver` is replaced by `StandInResolver`, which
does what TF 2.20's constructor does (`tpu_cluster_resolver.py`, `client.py`'s `Client`)
without a network: `tpu="local"` takes the attached chips; any other value goes through
`Client`, which reads the name from `tpu`, else `KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS`, else
`TPU_NAME`, and raises `ValueError("Please provide a TPU Name to connect to.")` without
one. `test_the_stand_in_constructs_as_tensorflows_resolver_does` checks it against the
installed TensorFlow for the cases that need no network. Connecting and initialising the
TPU system are recorded (or made to fail) by `FakeTPUSystem`.
"""

import os
import re
import types

import pytest
import tensorflow as tf

from xlnet_tf.training import strategy as strategy_module
from xlnet_tf.training.run_sections import DistributionSection, TrainingSection
from xlnet_tf.training.run_setup import RunSetup
from xlnet_tf.training.strategy import StrategyError, resolve_strategy
from xlnet_tf.training.tpu_host import TpuHost

TPU_VM_ENV = {"TPU_ACCELERATOR_TYPE": "v5litepod-1", "TPU_WORKER_ID": "0",
              "TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost"}
TPU_VARIABLES = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG", *TPU_VM_ENV)


class StandInResolver:
    """TF 2.20's `TPUClusterResolver.__init__` for `tpu=None`, `"local"` and a name, offline."""

    def __init__(self, tpu=None, zone=None, project=None, **kwargs):
        if tpu != "local":
            # client.Client: `_get_tpu_name` (tpu, else the GKE variable, else TPU_NAME).
            name = tpu or next((os.environ[v] for v in ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME")
                                if v in os.environ), None)
            if name is None and not os.environ.get("TPU_CONFIG"):
                raise ValueError("Please provide a TPU Name to connect to.")
            self._tpu = name
        else:
            self._tpu = "local"


class TPUStrategy:
    """Stands in for `tf.distribute.TPUStrategy`: one TPU replica; `target` is the TPU connected to."""

    def __init__(self, resolver):
        self.target, self.num_replicas_in_sync = resolver._tpu, 1
        self.extended = types.SimpleNamespace(
            worker_devices=("/job:worker/replica:0/task:0/device:TPU:0",))


class FakeTPUSystem:
    """Records which TPU was connected to; `fail` makes initialising the TPU system raise it."""

    def __init__(self, monkeypatch, fail=None):
        self.connected, self.fail = [], fail
        monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", StandInResolver)
        monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                            lambda resolver: self.connected.append(resolver._tpu))
        monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", self._initialize)
        monkeypatch.setattr(tf.distribute, "TPUStrategy", TPUStrategy)

    def _initialize(self, resolver):
        if self.fail is not None:
            raise self.fail


@pytest.fixture
def clean_env(monkeypatch):
    for name in TPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def fake_tpu_vm(root, monkeypatch, devices=("dev/accel0", "dev/accel1", "dev/accel2", "dev/accel3"),
                env=TPU_VM_ENV):
    """A TPU VM in `root`: its device files and variables; returns its `TpuHost`."""
    for device in devices:
        os.makedirs(os.path.dirname(os.path.join(root, device)), exist_ok=True)
        open(os.path.join(root, device), "w").close()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return TpuHost.detect(root=str(root), find_libtpu=lambda: "/site-packages/libtpu")


# ------------------------------------------------------------- detection


def test_detect_reads_device_files_and_variables_of_a_tpu_vm(tmp_path, clean_env):
    host = fake_tpu_vm(tmp_path, clean_env, devices=("dev/vfio/0", "dev/vfio/vfio", "dev/accel"))
    assert host.devices == ("/dev/vfio/0",)  # Not the VFIO control file, not the accel subsystem.
    assert host.has_hardware and host.accelerator_type == "v5litepod-1" and host.name == ""
    assert host.evidence() == ("device files /dev/vfio/0; TPU_ACCELERATOR_TYPE=v5litepod-1; "
                               "TPU_WORKER_ID=0; TPU_WORKER_HOSTNAMES=localhost; TPU_SKIP_MDS_QUERY=1; "
                               "libtpu at /site-packages/libtpu")
    # Device files alone (a Cloud TPU VM whose image sets no variable) are a TPU VM too.
    bare = TpuHost.detect(environ={}, root=str(tmp_path), find_libtpu=lambda: "")
    assert bare.has_hardware and bare.variables == ()


def test_no_device_file_and_only_the_metadata_switch_is_no_tpu(tmp_path):
    # The README's CPU install check sets TPU_SKIP_MDS_QUERY; that alone is not a TPU.
    host = TpuHost.detect(environ={"TPU_SKIP_MDS_QUERY": "1"}, root=str(tmp_path),
                          find_libtpu=lambda: "/x/libtpu")
    assert not host.has_hardware and strategy_module.tpu_target("", host) == ""


# ------------------------------------------------------------- on a TPU VM


@pytest.mark.parametrize("name", ["auto", "tpu"])
def test_auto_and_tpu_connect_to_the_attached_chips_with_local(tmp_path, clean_env, name):
    system = FakeTPUSystem(clean_env)
    host = fake_tpu_vm(tmp_path, clean_env)
    assert resolve_strategy(name, tpu_host=host).target == "local"
    assert system.connected == ["local"]


def test_tpu_on_a_tpu_vm_with_default_detection_needs_no_flag(tmp_path, clean_env, monkeypatch):
    system = FakeTPUSystem(clean_env)
    fake_tpu_vm(tmp_path, clean_env)
    real_detect = TpuHost.detect.__func__
    monkeypatch.setattr(TpuHost, "detect", classmethod(
        lambda cls, environ=None, root="/", find_libtpu=None: real_detect(cls, environ, str(tmp_path),
                                                                          lambda: "")))
    setup = RunSetup.resolve(DistributionSection(strategy="tpu"), TrainingSection(global_batch_size=8),
                             paths={"workdir": "/content/run"})  # A TPU VM's own disk is fine.
    assert setup.strategy.target == "local" and system.connected == ["local"]
    assert setup.devices == {"strategy": "TPUStrategy", "replicas": 1, "device_kind": "TPU v5litepod-1"}


@pytest.mark.parametrize("failure, cause", [
    (tf.errors.NotFoundError(None, None, "No TPU devices found."),
     "NotFoundError: No TPU devices found."),
    (RuntimeError("TPU is in use by another process (pid 17)"),
     r"RuntimeError: TPU is in use by another process \(pid 17\)")])
def test_auto_with_tpu_hardware_that_fails_to_connect_is_an_error_naming_the_cause(
        tmp_path, clean_env, failure, cause):
    FakeTPUSystem(clean_env, fail=failure)
    host = fake_tpu_vm(tmp_path, clean_env)
    with pytest.raises(StrategyError) as raised:
        resolve_strategy("auto", tpu_host=host)
    message = str(raised.value)
    assert message.startswith("--strategy auto: this machine has TPU chips (device files /dev/accel0, ")
    assert "TPU_ACCELERATOR_TYPE=v5litepod-1" in message and "libtpu at /site-packages/libtpu" in message
    assert re.search(f"with tpu='local' \\({cause}\\)", message), message
    assert "tensorflow-tpu" in message and "--strategy one_device" in message  # The fix.


def test_tpu_name_variable_or_flag_connects_to_that_tpu(tmp_path, clean_env):
    system = FakeTPUSystem(clean_env)
    host = fake_tpu_vm(tmp_path, clean_env, env={**TPU_VM_ENV, "TPU_NAME": "pod-slice-a"})
    assert resolve_strategy("auto", tpu_host=host).target == "pod-slice-a"
    assert resolve_strategy("tpu", tpu_host=host, tpu_address="grpc://10.0.0.2:8470").target == \
        "grpc://10.0.0.2:8470"
    assert system.connected == ["pod-slice-a", "grpc://10.0.0.2:8470"]


def test_a_named_tpu_that_fails_says_where_the_name_came_from(tmp_path, clean_env):
    FakeTPUSystem(clean_env, fail=ValueError("No TPUs with the specified names exist."))
    host = TpuHost.detect(environ={}, root=str(tmp_path), find_libtpu=lambda: "")
    with pytest.raises(StrategyError, match=r"could not connect to TPU 'my-node' \(from --tpu / "
                       r"distribution.tpu\) \(ValueError: No TPUs with the specified names exist.\)"):
        resolve_strategy("auto", tpu_host=host, tpu_address="my-node")


# ------------------------------------------------------------- without a TPU


def test_tpu_without_any_tpu_is_tensorflows_error_with_the_fix(tmp_path, clean_env):
    system = FakeTPUSystem(clean_env)
    host = TpuHost.detect(root=str(tmp_path), find_libtpu=lambda: "")
    with pytest.raises(StrategyError, match=r"--strategy tpu: no TPU found \(ValueError: Please "
                       r"provide a TPU Name to connect to.\)\. This machine shows no TPU "
                       r"\(libtpu not installed\)"):
        resolve_strategy("tpu", tpu_host=host)
    assert system.connected == []


def test_auto_without_a_tpu_picks_the_default_strategy_and_never_asks_the_resolver(tmp_path,
                                                                                   clean_env):
    system = FakeTPUSystem(clean_env, fail=AssertionError("no TPU: nothing to connect to"))
    host = TpuHost.detect(root=str(tmp_path), find_libtpu=lambda: "/x/libtpu")  # libtpu alone: no TPU
    # No GPU here; the 2 virtual CPUs of conftest.py were not asked for by this run.
    assert resolve_strategy("auto", tpu_host=host) is tf.distribute.get_strategy()
    assert system.connected == []


def test_auto_without_a_tpu_picks_mirrored_over_several_gpus(tmp_path, clean_env, monkeypatch):
    FakeTPUSystem(clean_env, fail=AssertionError("no TPU: nothing to connect to"))
    gpus = [tf.config.LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(2)]
    real = tf.config.list_logical_devices
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda kind=None: gpus if kind == "GPU" else real(kind))
    built = []
    monkeypatch.setattr(tf.distribute, "MirroredStrategy", lambda devices: built.append(devices) or "M")
    host = TpuHost.detect(root=str(tmp_path), find_libtpu=lambda: "")
    assert resolve_strategy("auto", tpu_host=host) == "M"
    assert built == [["/device:GPU:0", "/device:GPU:1"]]


def test_the_stand_in_constructs_as_tensorflows_resolver_does(clean_env):
    real = tf.distribute.cluster_resolver.TPUClusterResolver
    for cls in (real, StandInResolver):
        with pytest.raises(ValueError, match=r"^Please provide a TPU Name to connect to\.$"):
            cls(tpu=None)
        with pytest.raises(ValueError, match=r"^Please provide a TPU Name to connect to\.$"):
            cls(tpu="")
        assert cls(tpu="local")._tpu == "local"
        assert cls(tpu="grpc://10.0.0.2:8470")._tpu == "grpc://10.0.0.2:8470"
    clean_env.setenv("TPU_NAME", "grpc://10.0.0.3:8470")
    assert real(tpu=None)._tpu == StandInResolver(tpu=None)._tpu == "grpc://10.0.0.3:8470"


# ------------------------------------------------------------- a TPU reached by name


@pytest.mark.parametrize("distribution", [
    DistributionSection(strategy="tpu", tpu="my-node"),
    DistributionSection(strategy="auto", tpu="grpc://10.0.0.2:8470")])
def test_a_tpu_reached_by_name_refuses_local_paths_before_connecting(tmp_path, clean_env,
                                                                     distribution):
    system = FakeTPUSystem(clean_env)
    host = TpuHost.detect(root=str(tmp_path), find_libtpu=lambda: "")
    with pytest.raises(StrategyError, match=(
            r"reached by name \(a TPU Node or a pod slice\).*must be on gs:// \(Cloud Storage\); "
            r"not on gs://: data.train_files=/data/\*, workdir=/runs/a\. ")):
        RunSetup.resolve(distribution, TrainingSection(global_batch_size=8), tpu_host=host,
                         paths={"data.train_files": ["/data/*", "gs://b/x"], "workdir": "/runs/a",
                                "task.eval_file": ""})
    assert system.connected == []  # Refused before connecting.
    setup = RunSetup.resolve(distribution, TrainingSection(global_batch_size=8), tpu_host=host,
                             paths={"data.train_files": "gs://b/*", "workdir": "gs://b/run"})
    assert setup.strategy.target == distribution.tpu


# ------------------------------------------------------------- device kind


def test_device_kind_names_the_tpu_type_the_gpu_or_the_cpu():
    tpu = TPUStrategy(StandInResolver("local"))
    host = TpuHost(variables=(("TPU_ACCELERATOR_TYPE", "v5litepod-1"),))
    assert strategy_module.describe_devices(tpu, host) == {
        "strategy": "TPUStrategy", "replicas": 1, "device_kind": "TPU v5litepod-1"}
    assert strategy_module.describe_devices(tpu, TpuHost())["device_kind"] == "TPU"
    assert strategy_module.describe_devices(tf.distribute.get_strategy(), TpuHost()) == {
        "strategy": "_DefaultDistributionStrategy", "replicas": 1, "device_kind": "CPU"}
    assert strategy_module.devices_line(
        {"strategy": "MirroredStrategy", "replicas": 2, "device_kind": "CPU"}) == (
        "Devices: tensorflow, MirroredStrategy, 2 replicas, CPU: this run trains on the CPU (no TPU or GPU in use).")
