"""Distribution strategy resolution and batch-size arithmetic.

`resolve_strategy("auto")` picks a TPU when one is reachable, several GPUs
when present, else the default (single device) strategy. Virtual CPU devices
let a laptop exercise the same multi-replica code paths as a TPU pod.
"""

import json
import logging
import os

# The names `distribution.strategy` and `--strategy` accept. TensorFlow is imported
# inside the functions, so the CLI reads these names without loading it (fast `--help`).
STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker", "one_device")

_log = logging.getLogger(__name__)


class StrategyError(ValueError):
    """The requested strategy or batch size cannot be set up."""


def configure_virtual_cpu_devices(count: int) -> None:
    """Splits the physical CPU into `count` logical devices.

    Must run before TensorFlow initialises its devices (before the first op).
    Calling it again with the same count is a no-op.

    Args:
        count: number of logical CPU devices (>= 1).
    """
    import tensorflow as tf

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
                     tpu_address: str = ""):
    """Returns the `tf.distribute.Strategy` named by `name`.

    Args:
        name: one of "auto", "tpu", "mirrored", "multi_worker", "one_device".
            "auto" finds a TPU, else uses MirroredStrategy over several GPUs (or
            over virtual CPU devices when `virtual_cpu_devices > 1`), else the
            default strategy.
        virtual_cpu_devices: when > 0, split the CPU into that many logical
            devices first; "mirrored"/"auto" then replicate over them when there
            is no GPU.
        tpu_address: TPU name or grpc address ("" = Colab/Cloud TPU VM default).

    Returns:
        A strategy; its `num_replicas_in_sync` is the number of replicas.
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise StrategyError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")
    if virtual_cpu_devices:
        configure_virtual_cpu_devices(virtual_cpu_devices)
    if name in ("tpu", "auto"):
        tpu = _connect_tpu(tpu_address, required=name == "tpu")
        if tpu is not None:
            return tf.distribute.TPUStrategy(tpu)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            _log.warning("multi_worker strategy without TF_CONFIG: running as a single worker.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    cpus = tf.config.list_logical_devices("CPU")
    if name == "one_device":
        device = gpus[0].name if gpus else cpus[0].name
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
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


def _connect_tpu(address: str, required: bool):
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return resolver
    except (ValueError, RuntimeError, tf.errors.NotFoundError, tf.errors.UnavailableError) as e:
        if required:
            raise StrategyError(f"--strategy tpu: no TPU found ({e}).") from e
        return None


def per_replica_batch_size(global_batch_size: int, num_replicas: int) -> int:
    """Splits a global batch evenly over replicas; an uneven split is an error.

    Args:
        global_batch_size: examples per optimizer step over all replicas.
        num_replicas: `strategy.num_replicas_in_sync`.

    Returns:
        Examples per replica per step.
    """
    if global_batch_size <= 0:
        raise StrategyError(f"global_batch_size must be > 0, got {global_batch_size}.")
    if global_batch_size % num_replicas:
        raise StrategyError(
            f"global_batch_size {global_batch_size} does not divide evenly over "
            f"{num_replicas} replicas; use a multiple of {num_replicas} (or set "
            f"per_replica_batch_size instead).")
    return global_batch_size // num_replicas


def resolve_batch_sizes(*, global_batch_size, per_replica_batch_size_value, num_replicas):
    """Returns `(global, per_replica)` from whichever of the two is given.

    Exactly one may be given (None for the other); both given must agree.
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
        return implied, per_replica_batch_size_value
    return global_batch_size, per_replica_batch_size(global_batch_size, num_replicas)


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
