"""Distribution strategy resolution and batch-size arithmetic.

`resolve_strategy("auto")` picks the TPU when this machine has one (the chips
of a TPU VM, or a TPU named by `TPU_NAME`/`--tpu`), several GPUs when present,
else the default (single device) strategy; a TPU that is there but cannot be
connected to is an error, never a silent fallback to the CPU. Virtual CPU
devices let a laptop exercise the same multi-replica code paths as a TPU pod.
"""

import json
import math
import logging
import os

from xlnet_tf.training.tpu_host import TpuHost

# The names `distribution.strategy` and `--strategy` accept. TensorFlow is imported
# inside the functions, so the CLI reads these names without loading it (fast `--help`).
# The last three are `keras.distribution` names (`xlnet_tf.training.jax_distribution`);
# on TensorFlow `data_parallel` is "mirrored" and `cpu` one CPU device, and every
# TensorFlow name has its JAX meaning there, so one config runs on either backend.
STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker", "one_device", "data_parallel", "model_parallel", "cpu")
# Names only a `keras.distribution` backend (JAX) can run.
JAX_ONLY_STRATEGIES = ("model_parallel",)

_log = logging.getLogger(__name__)


def _tensorflow():
    """TensorFlow, imported when a strategy or a device list is asked for."""
    import tensorflow as tf  # import time: the strategy names and errors load without TensorFlow (the CLI)

    return tf


class StrategyError(ValueError):
    """The requested strategy or batch size cannot be set up; the message names the cause and the fix.

    Example:
    >>> from xlnet_tf import StrategyError, per_replica_batch_size
    >>> try:
    ...     per_replica_batch_size(12, 8)
    ... except StrategyError as e:
    ...     print(str(e).split(";")[0])
    global_batch_size 12 does not divide evenly over 8 replicas
    """


def configure_virtual_cpu_devices(count: int) -> None:
    """Splits the physical CPU into `count` logical devices.

    Must run before TensorFlow initialises its devices (before the first op).
    Calling it again with the same count is a no-op.

    Args:
        count: number of logical CPU devices (>= 1).
    """
    tf = _tensorflow()

    if count < 1:
        raise StrategyError(f"--virtual-cpu-devices must be >= 1, got {count}.")
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current is not None and len(current) == count:
        return
    if count == 1 and current is None:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    except RuntimeError as e:
        raise StrategyError(
            f"Cannot split the CPU into {count} virtual devices: TensorFlow is already "
            f"initialised ({e}). Configure virtual devices before building any tensor.") from e


def resolve_strategy(name: str = "auto", *, virtual_cpu_devices: int = 0,
                     tpu_address: str = "", tpu_host=None):
    """Returns the `tf.distribute.Strategy` named by `name`.

    "auto" and "tpu" connect to the TPU `tpu_target` names: `tpu_address`, else
    the `TPU_NAME` variable, else `"local"` on a TPU VM (TensorFlow's resolver
    needs that word for attached chips; without it, it asks for a TPU name).
    When there is a TPU to connect to and connecting fails, both are an error
    naming the cause and the fix: "auto" never falls back to the CPU of a TPU
    machine.

    Args:
        name: one of `STRATEGIES`: "auto", "tpu", "mirrored" (or "data_parallel"),
            "multi_worker", "one_device", "cpu"; "model_parallel" is JAX's only.
            "auto" uses the TPU when there is one, else MirroredStrategy over
            several GPUs (or over virtual CPU devices when
            `virtual_cpu_devices > 1`), else the default strategy.
        virtual_cpu_devices: when > 0, split the CPU into that many logical
            devices first; "mirrored"/"auto" then replicate over them when there
            is no GPU.
        tpu_address: TPU name or grpc address ("" = `TPU_NAME`, or the attached
            chips of a TPU VM).
        tpu_host (TpuHost | None): the `TpuHost` to read (default: this machine's).

    Returns:
        A strategy; its `num_replicas_in_sync` is the number of replicas.

    Raises:
        StrategyError: an unknown name, "tpu" without a TPU, or a TPU that is
            there but cannot be connected to.

    Example:
    >>> from xlnet_tf import resolve_strategy
    >>> type(resolve_strategy("one_device")).__name__
    'OneDeviceStrategy'
    """
    tf = _tensorflow()

    if name not in STRATEGIES:
        raise StrategyError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")
    if name in JAX_ONLY_STRATEGIES:
        raise StrategyError(f"--strategy {name} shards the model with keras.distribution, which needs the "
                            f"JAX backend: run with --backend jax (or `backend: jax` in the run config).")
    if virtual_cpu_devices:
        configure_virtual_cpu_devices(virtual_cpu_devices)
    if name in ("tpu", "auto"):
        host = TpuHost.detect() if tpu_host is None else tpu_host
        target = tpu_target(tpu_address, host)
        if target or name == "tpu":
            return tf.distribute.TPUStrategy(_connect_tpu(target, host, tpu_address, name))
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            _log.warning("multi_worker strategy without TF_CONFIG: running as a single worker.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    cpus = tf.config.list_logical_devices("CPU")
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy(cpus[0].name)
    if name == "one_device":
        device = gpus[0].name if gpus else cpus[0].name
        return tf.distribute.OneDeviceStrategy(device)
    if name in ("mirrored", "data_parallel"):
        devices = [d.name for d in gpus] or [d.name for d in cpus]
        return tf.distribute.MirroredStrategy(devices)
    # auto, no TPU.
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy([d.name for d in gpus])
    # Several logical CPUs mean replicas only when this run asked for them: devices split by
    # someone else in the same process (a test harness, a notebook) must not change "auto".
    if not gpus and virtual_cpu_devices > 1 and len(cpus) > 1:
        return tf.distribute.MirroredStrategy([d.name for d in cpus])
    return tf.distribute.get_strategy()


def tpu_target(tpu_address: str, host) -> str:
    """The TPU "auto"/"tpu" connect to: the address, else the environment's TPU name, else
    `"local"` when chips are attached (a TPU VM), else "" (no TPU).

    Example:
    >>> from xlnet_tf.training.strategy import tpu_target
    >>> from xlnet_tf.training.tpu_host import TpuHost
    >>> tpu_target("", TpuHost(devices=("/dev/accel0",))), tpu_target("", TpuHost())
    ('local', '')
    >>> tpu_target("my-tpu", TpuHost(devices=("/dev/accel0",)))
    'my-tpu'
    """
    if tpu_address:
        return tpu_address
    if host.name:
        return host.name
    return "local" if host.has_hardware else ""


def is_remote_tpu(target: str) -> bool:
    """Whether `target` (a `tpu_target`) is a TPU reached by name: a TPU Node or a pod slice,
    whose own hosts read the data and write the work directory."""
    return bool(target) and target != "local"


def check_remote_tpu_paths(target: str, paths) -> None:
    """Refuses local paths for a TPU reached by name, before anything starts.

    The hosts of a TPU Node (or of a pod slice) run the input pipeline and the
    checkpoint ops; a path on this machine is not there ("File system scheme
    '[local]' not implemented"), so data and work directory must be on gs://.

    Args:
        target: the TPU the run connects to (`tpu_target`).
        paths: `{what: path or list of paths}`, for example `{"workdir": ...}`;
            empty values are skipped.

    Raises:
        StrategyError: naming every path that is not on gs://.

    Example:
    >>> from xlnet_tf.training.strategy import check_remote_tpu_paths
    >>> check_remote_tpu_paths("local", {"workdir": "/tmp/run"})  # a TPU VM: its own disk
    >>> check_remote_tpu_paths("my-tpu", {"workdir": "/tmp/run"})
    Traceback (most recent call last):
    ...
    xlnet_tf.training.strategy.StrategyError: TPU 'my-tpu' is reached by name (a TPU Node or a pod slice):
    its hosts read the data and write the work directory, so both must be on gs:// (Cloud Storage); not on gs://:
    workdir=/tmp/run. Copy them to a bucket (gsutil cp) and pass gs:// paths, or run on a TPU VM (--tpu local).
    """
    if not is_remote_tpu(target):
        return
    local = []
    for what, value in paths.items():
        for path in ([value] if isinstance(value, str) else list(value or ())):
            if path and not str(path).startswith("gs://"):
                local.append(f"{what}={path}")
    if local:
        raise StrategyError(
            f"TPU {target!r} is reached by name (a TPU Node or a pod slice): its hosts read the data "
            f"and write the work directory, so both must be on gs:// (Cloud Storage); not on gs://: "
            f"{', '.join(local)}. Copy them to a bucket (gsutil cp) and pass gs:// paths, or run on "
            f"a TPU VM (--tpu local).")


def _connect_tpu(target: str, host, tpu_address: str, name: str):
    """Connects to `target` and initialises its TPU system; a failure is a `StrategyError`."""
    tf = _tensorflow()

    try:
        # tpu=None lets TensorFlow read its own variables (TPU_CONFIG on GKE); it then
        # asks for a TPU name, which the message below answers.
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return resolver
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as e:
        raise StrategyError(_tpu_failure(target, host, tpu_address, name, e)) from e


def _tpu_failure(target, host, tpu_address, name, error) -> str:
    """The message of a TPU that cannot be connected to: the cause, what was found, the fix."""
    cause = f"{type(error).__name__}: {error}"
    if not target:
        return (f"--strategy {name}: no TPU found ({cause}). This machine shows no TPU "
                f"({host.evidence()}). On a TPU VM the chips appear as /dev/accel* or "
                f"/dev/vfio/N; for a TPU Node or a pod slice pass --tpu NAME (or set TPU_NAME). "
                f"Without a TPU use --strategy auto, mirrored or one_device.")
    if target == "local":
        return (f"--strategy {name}: this machine has TPU chips ({host.evidence()}) but "
                f"TensorFlow could not connect to them with tpu='local' ({cause}). Fix: install "
                f"TensorFlow's TPU build as the README's TPU section says (tensorflow-tpu with its "
                f"pinned libtpu, not the plain tensorflow wheel), restart the runtime, and make sure "
                f"no other process holds the TPU. To train on the CPU anyway, pass --strategy "
                f"one_device.")
    source = "--tpu / distribution.tpu" if tpu_address else "the TPU_NAME variable"
    return (f"--strategy {name}: could not connect to TPU {target!r} (from {source}) ({cause}). "
            f"Fix: check the TPU's name, zone and project (or pass its grpc://IP:8470 address), "
            f"and that it is running; on a TPU VM unset TPU_NAME or pass --tpu local.")


def describe_devices(strategy, tpu_host=None) -> dict:
    """Where `strategy` trains: its class, replicas and device kind.

    The device kind is "TPU" with the accelerator type when the TPU VM names it
    ("TPU v5litepod-1"), "GPU" with the card's name when TensorFlow knows it, or
    "CPU". Every run prints these three (`devices_line`) and records them in
    its config.yaml.

    Args:
        strategy: a `tf.distribute.Strategy`.
        tpu_host: the `TpuHost` to read the accelerator type from (default: this machine's).

    Returns:
        `{"strategy": class name, "replicas": int, "device_kind": str}`.

    Example:
    >>> from xlnet_tf.training.strategy import describe_devices
    >>> import tensorflow as tf
    >>> describe_devices(tf.distribute.OneDeviceStrategy("/cpu:0"))
    {'strategy': 'OneDeviceStrategy', 'replicas': 1, 'device_kind': 'CPU'}
    """
    tf = _tensorflow()

    try:
        kinds = {tf.DeviceSpec.from_string(d).device_type for d in strategy.extended.worker_devices}
    except RuntimeError:  # The default strategy: TensorFlow's own placement, GPU:0 when there is one.
        kinds = {"GPU" if tf.config.list_logical_devices("GPU") else "CPU"}
    kind = "TPU" if "TPU" in kinds else "GPU" if "GPU" in kinds else "CPU"
    if kind == "TPU":
        host = TpuHost.detect() if tpu_host is None else tpu_host
        kind = f"TPU {host.accelerator_type}".strip()
    elif kind == "GPU":
        gpus = tf.config.list_physical_devices("GPU")
        details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
        kind = f"GPU {details.get('device_name', '')}".strip()
    return {"strategy": type(strategy).__name__, "replicas": int(strategy.num_replicas_in_sync),
            "device_kind": kind}


def devices_line(devices: dict) -> str:
    """The line a run prints at start from `describe_devices`: the backend, then the devices.

    A CPU run says it trains on the CPU. The `backend` entry is there for JAX and
    PyTorch runs; without it (`tf.distribute` strategies) the backend is TensorFlow.

    Example:
    >>> from xlnet_tf.training.strategy import devices_line
    >>> devices_line({"strategy": "TPUStrategy", "replicas": 8, "device_kind": "TPU v2-8"})
    'Devices: tensorflow, TPUStrategy, 8 replicas, TPU v2-8.'
    >>> devices_line({"strategy": "OneDeviceStrategy", "replicas": 1, "device_kind": "CPU"})
    'Devices: tensorflow, OneDeviceStrategy, 1 replica, CPU: this run trains on the CPU (no TPU or GPU in use).'
    >>> devices_line({"backend": "jax", "strategy": "DataParallel", "replicas": 8, "device_kind": "TPU v2-8"})
    'Devices: jax, DataParallel, 8 replicas, TPU v2-8.'
    """
    replicas = devices["replicas"]
    line = (f"Devices: {devices.get('backend') or 'tensorflow'}, {devices['strategy']}, "
            f"{replicas} replica{'s' if replicas != 1 else ''}, {devices['device_kind']}")
    if devices["device_kind"] == "CPU":
        return line + ": this run trains on the CPU (no TPU or GPU in use)."
    return line + "."


def per_replica_batch_size(global_batch_size: int, num_replicas: int) -> int:
    """Splits a global batch evenly over replicas; an uneven split is an error.

    Args:
        global_batch_size: examples per optimizer step over all replicas.
        num_replicas: `strategy.num_replicas_in_sync`.

    Returns:
        Examples per replica per step.

    Example:
    >>> from xlnet_tf import per_replica_batch_size
    >>> per_replica_batch_size(256, 8), per_replica_batch_size(256, 1)
    (32, 256)
    """
    if global_batch_size <= 0:
        raise StrategyError(f"global_batch_size must be > 0, got {global_batch_size}.")
    if global_batch_size % num_replicas:
        raise StrategyError(
            f"global_batch_size {global_batch_size} does not divide evenly over "
            f"{num_replicas} replicas; use a multiple of {num_replicas} (or set "
            f"per_replica_batch_size instead).")
    return global_batch_size // num_replicas


def resolve_batch_sizes(*, global_batch_size, per_replica_batch_size_value, num_replicas, num_processes=1):
    """Returns `(global, per_replica)` from whichever of the two is given: the batch arithmetic of every backend.

    Exactly one may be given (None for the other); both given must agree. The global
    batch must split evenly over the replicas and over the `num_processes` input
    pipelines (each process reads its share).
    """
    if global_batch_size is None and per_replica_batch_size_value is None:
        raise StrategyError("Set training.global_batch_size or training.per_replica_batch_size.")
    if per_replica_batch_size_value is not None:
        if per_replica_batch_size_value <= 0:
            raise StrategyError(
                f"per_replica_batch_size must be > 0, got {per_replica_batch_size_value}.")
        implied = per_replica_batch_size_value * num_replicas
        if global_batch_size is not None and global_batch_size != implied:
            raise StrategyError(
                f"global_batch_size {global_batch_size} != per_replica_batch_size "
                f"{per_replica_batch_size_value} x {num_replicas} replicas = {implied}.")
        global_batch_size = implied
    per_replica = per_replica_batch_size(global_batch_size, num_replicas)
    if global_batch_size % num_processes:
        raise StrategyError(f"global_batch_size {global_batch_size} does not divide evenly over {num_processes} "
                            f"processes; use a multiple of {math.lcm(num_processes, num_replicas)}.")
    return global_batch_size, per_replica


def tensorflow_placement(distribution, strategy, paths, host) -> dict:
    """Where a run trains on TensorFlow (`RunSetup`'s fields but the batch sizes): the `tf.distribute` strategy
    (unless given), its replicas, this worker.

    A TPU reached by name needs the run's `paths` on gs://, checked before connecting to it.
    """
    if strategy is None:
        if distribution.strategy in ("auto", "tpu"):
            check_remote_tpu_paths(tpu_target(distribution.tpu, host), paths)
        strategy = resolve_strategy(distribution.strategy, virtual_cpu_devices=distribution.virtual_cpu_devices,
                                    tpu_address=distribution.tpu, tpu_host=host)
    _, task_id, is_chief = task_info()
    return {"strategy": strategy, "replicas": strategy.num_replicas_in_sync, "task_id": task_id, "is_chief": is_chief,
            "devices": describe_devices(strategy, host)}


def task_info():
    """Returns `(task_type, task_id, is_chief)` of this process from TF_CONFIG."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task", {})
    task_type, task_id = task.get("type"), int(task.get("index", 0))
    cluster = config.get("cluster", {})
    if task_type is None:
        return None, 0, True
    if "chief" in cluster:
        return task_type, task_id, task_type == "chief"
    return task_type, task_id, task_type == "worker" and task_id == 0
