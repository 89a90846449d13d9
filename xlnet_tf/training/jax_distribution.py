"""Where a run trains on JAX: `keras.distribution` resolved from the run's `distribution.strategy`.

The names are those of `xlnet_tf.training.strategy.STRATEGIES`, with their JAX meaning:

- `auto`: every local accelerator (TPU chips, GPUs) through `DataParallel`; one
  accelerator, or a host with only its CPU (a laptop), trains on that one device
  without a distribution. `virtual_cpu_devices > 1` splits the CPU and replicates
  over it, as on TensorFlow.
- `data_parallel` (also `mirrored`, `tpu`, `multi_worker`): `DataParallel` over every
  device of the default platform (`tpu` insists on TPU devices).
- `model_parallel`: a `(batch, model)` `DeviceMesh` and a `LayoutMap` that splits the
  attention heads and the feed-forward width of every block (and the vocabulary of
  the embedding) along `model` (`backbone_layout_map`).
- `one_device`: the default device; `cpu`: the first CPU device.

Several hosts join through `keras.distribution.initialize` when the environment
names a cluster (`KERAS_DISTRIBUTION_*`, `JAX_COORDINATOR_ADDRESS`, a multi-host TPU
slice). A machine with TPU chips whose JAX cannot use them (the CPU-only `jax` wheel,
a libtpu that does not match) is an error in one line, never a silent CPU run.

The batch-shaped state of a run (the recurrence memory, a non-trainable variable
whose path ends in `recurrence_memory`) is laid out along the batch axis like the
data, so every device keeps the memory of its own rows.

Example:
>>> from xlnet_tf.training.jax_distribution import resolve_jax_distribution
>>> placement = resolve_jax_distribution("cpu")  # doctest: +SKIP
>>> placement.num_replicas_in_sync, placement.devices["strategy"]  # doctest: +SKIP
(1, 'SingleDevice')
"""

import contextlib
import logging
import os
import re
from importlib import metadata

import keras

from xlnet_tf.training.strategy import STRATEGIES, StrategyError
from xlnet_tf.training.tpu_host import TpuHost

_log = logging.getLogger(__name__)

# Paths (regex, full match) of non-trainable variables that hold one row per example:
# split along the batch like the data, never replicated.
BATCH_SHARDED_VARIABLES = r"(.*/)?recurrence_memory"
# Variables the cluster environment sets for `keras.distribution.initialize` / `jax.distributed`.
CLUSTER_VARIABLES = ("KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_JOB_ADDRESSES",
                     "JAX_COORDINATOR_ADDRESS")
BATCH_AXIS, MODEL_AXIS = "batch", "model"

_initialized = False


def _jax():
    import jax  # optional dependency: only the JAX backend resolves devices here

    return jax


def _jax_devices(platform=None):
    """`jax.devices(platform)`: every device of the cluster (tests replace it with fakes)."""
    jax = _jax()
    return list(jax.devices(platform)) if platform else list(jax.devices())


def _process_info():
    """`(process_count, process_index)` of this JAX process."""
    jax = _jax()
    return jax.process_count(), jax.process_index()


def _versions():
    """The installed jax, jaxlib and libtpu versions, for messages."""
    found = []
    for name in ("jax", "jaxlib", "libtpu", "libtpu-nightly"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found) or "no jax installed"


def cluster_requested(environ=None, host=None) -> bool:
    """Whether the environment describes several processes (so `initialize` must run first).

    Example:
    >>> from xlnet_tf.training.jax_distribution import TpuHost, cluster_requested
    >>> cluster_requested({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2"}, TpuHost())
    True
    >>> cluster_requested({}, TpuHost(variables=(("TPU_WORKER_HOSTNAMES", "a,b"),)))
    True
    >>> cluster_requested({}, TpuHost())
    False
    """
    environ = os.environ if environ is None else environ
    if any(environ.get(v) for v in CLUSTER_VARIABLES):
        return environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "2") != "1"
    hostnames = dict((host or TpuHost()).variables).get("TPU_WORKER_HOSTNAMES", "")
    return "," in hostnames


def initialize_cluster(environ=None, host=None, initialize=None) -> bool:
    """Joins the cluster the environment describes (once per process); returns whether it did.

    Must run before the first JAX computation. `initialize` defaults to
    `keras.distribution.initialize`, which reads `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
    `..._NUM_PROCESSES` and `..._PROCESS_ID` (or JAX's own detection on a TPU slice).
    """
    global _initialized
    if _initialized or not cluster_requested(environ, host):
        return False
    try:
        (initialize or keras.distribution.initialize)()
    except (RuntimeError, ValueError) as e:
        raise StrategyError(f"Could not join the cluster the environment describes "
                            f"({type(e).__name__}: {e}); check KERAS_DISTRIBUTION_JOB_ADDRESSES, "
                            f"KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID.") from e
    _initialized = True
    return True


def configure_virtual_cpu_devices(count: int) -> None:
    """Splits the CPU into `count` JAX devices; must run before JAX starts its CPU backend."""
    if count < 1:
        raise StrategyError(f"--virtual-cpu-devices must be >= 1, got {count}.")
    jax = _jax()
    # optional dependency (JAX): whether the CPU backend (and so its device count) is fixed already
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        present = len(jax.devices("cpu"))
        if present != count:
            raise StrategyError(
                f"Cannot split the CPU into {count} virtual devices: JAX has already started its CPU backend "
                f"with {present}. Set it before the first JAX computation, or start with "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={count}.")
        return
    jax.config.update("jax_num_cpu_devices", count)


def _accelerators(name, host):
    """The devices of the default JAX platform; a TPU machine whose JAX cannot use it is an error."""
    try:
        devices = _jax_devices()
    except RuntimeError as e:
        raise StrategyError(
            f"--strategy {name} (JAX): JAX could not start its devices ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}; {_versions()}). On a TPU machine install JAX's TPU "
            f"build with its matching libtpu (pip install -U 'jax[tpu]'), restart the runtime and make sure no "
            f"other process holds the TPU; to train on the CPU pass --strategy cpu.") from e
    platform = devices[0].platform if devices else "cpu"
    if host.has_hardware and platform != "tpu" and name != "cpu":
        raise StrategyError(
            f"--strategy {name} (JAX): this machine has TPU chips ({host.evidence()}) but JAX sees only "
            f"{platform} devices ({_versions()}): install JAX's TPU build (pip install -U 'jax[tpu]', "
            f"with the libtpu it pins), restart the runtime; to train on the CPU anyway pass --strategy cpu.")
    if name == "tpu" and platform != "tpu":
        raise StrategyError(
            f"--strategy tpu (JAX): no TPU found; JAX sees {len(devices)} {platform} device(s) and this machine "
            f"shows no TPU ({host.evidence()}). Without a TPU use --strategy auto, data_parallel or cpu.")
    return devices


def device_kind(devices, host=None) -> str:
    """"TPU <type>", "GPU <name>" or "CPU": what `devices` (JAX devices) are.

    Example:
    >>> from xlnet_tf.training.jax_distribution import TpuHost
    >>> class Chip:
    ...     platform, device_kind = "tpu", "TPU v5 lite"
    >>> device_kind([Chip()], TpuHost(variables=(("TPU_ACCELERATOR_TYPE", "v5litepod-8"),)))
    'TPU v5litepod-8'
    """
    first = devices[0]
    if first.platform == "tpu":
        accelerator = (host or TpuHost()).accelerator_type
        return f"TPU {accelerator}".strip() if accelerator else str(first.device_kind)
    if first.platform == "gpu":
        return f"GPU {first.device_kind}".strip()
    return "CPU"


class BatchShardedDataParallel(keras.distribution.DataParallel):
    """`DataParallel` whose one-row-per-example state (`BATCH_SHARDED_VARIABLES`) is split along the batch.

    Keras replicates every variable under `DataParallel`; the recurrence memory
    `[B, layers, M, H]` must instead follow its rows, as the data do, so that each
    device reads and writes only the memory of the rows it trains on.
    """

    def get_variable_layout(self, variable):
        if variable.path and re.fullmatch(BATCH_SHARDED_VARIABLES, variable.path) and len(variable.shape):
            axes = [self.batch_dim_name] + [None] * (len(variable.shape) - 1)  # [B, ...] split along B
            return keras.distribution.TensorLayout(axes, self.device_mesh)
        return super().get_variable_layout(variable)


def backbone_layout_map(device_mesh, model_config=None):
    """The `LayoutMap` of `model_parallel`: XLNet's block kernels split along the mesh's `model` axis.

    Megatron's split: the query, key, value and position kernels `[H, N, D]` and the
    output kernel `[H, N, D]` by heads `N`; the feed-forward intermediate kernel
    `[H, I]` and its bias by `I`, the output kernel `[I, H]` by `I`; the word
    embedding `[V, H]` by vocabulary. A dimension that does not divide by the
    `model` axis stays whole (every device holds it). The recurrence memory follows
    the batch.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh` with axes `("batch", "model")`.
        model_config: the backbone's `XLNetConfig` (sizes checked for divisibility);
            None splits every rule's dimension.

    Returns:
        A `keras.distribution.LayoutMap`.
    """
    size = device_mesh.shape[device_mesh.axis_names.index(MODEL_AXIS)]

    def split(dimension):
        return MODEL_AXIS if model_config is None or getattr(model_config, dimension) % size == 0 else None

    heads, width, vocabulary = split("num_heads"), split("intermediate_dim"), split("vocabulary_size")
    layout_map = keras.distribution.LayoutMap(device_mesh)
    layout_map[r".*/attention/(query|key|value|position|output)_kernel"] = (None, heads, None)  # [H, N, D]
    layout_map[r".*/feedforward_intermediate/kernel"] = (None, width)  # [H, I]
    layout_map[r".*/feedforward_intermediate/bias"] = (width,)  # [I]
    layout_map[r".*/feedforward_output/kernel"] = (width, None)  # [I, H]
    layout_map[r".*/token_embedding/embeddings"] = (vocabulary, None)  # [V, H]
    layout_map[BATCH_SHARDED_VARIABLES] = (BATCH_AXIS, None, None, None)  # [B, layers, M, H]
    return layout_map


class KerasDistributionStrategy:
    """What a run needs of its placement on JAX, spelled as the engine uses a `tf.distribute.Strategy`.

    `scope()` makes the `keras.distribution` current (model building, `fit`);
    `num_replicas_in_sync` counts the devices along the batch (each holds
    `global_batch / replicas` rows); `distribute_datasets_from_function` builds the
    input pipeline of this process the way TensorFlow's strategies call it.

    Attributes:
        distribution: the `keras.distribution.Distribution`, or None (one device).
        device: the device of a run without distribution, or None.
        num_replicas_in_sync: devices along the batch axis.
        num_processes, process_id: this process in the cluster.
        devices: `{"backend", "strategy", "replicas", "device_kind"}` (`devices_line`).
    """

    def __init__(self, distribution, *, replicas, devices, device=None, processes=None):
        self.distribution = distribution
        self.device = device
        self.num_replicas_in_sync = int(replicas)
        self.num_processes, self.process_id = processes or _process_info()
        self.devices = devices

    @property
    def local_replicas(self) -> int:
        """Devices along the batch on this process: the per-replica batches one pipeline stacks."""
        return max(1, self.num_replicas_in_sync // self.num_processes)

    @contextlib.contextmanager
    def scope(self):
        """Makes this placement current: the distribution (variables, data) or the one device."""
        if self.distribution is not None:
            with self.distribution.scope():
                yield
        elif self.device is not None and keras.config.backend() == "jax":
            with _jax().default_device(self.device):
                yield
        else:
            yield

    def input_context(self):
        """The `tf.distribute.InputContext` of this process: one pipeline per process."""
        import tensorflow as tf  # optional dependency: the data side, tf.data on every backend

        return tf.distribute.InputContext(num_input_pipelines=self.num_processes, input_pipeline_id=self.process_id,
                                          num_replicas_in_sync=self.num_replicas_in_sync)

    def distribute_datasets_from_function(self, dataset_fn, *, bi_data=False):
        """This process's batches from `dataset_fn(input_context)`, which yields per-replica batches.

        The pipeline is called as TensorFlow's strategies call it (the same shards,
        the same per-replica batches in the same order); this process's
        `local_replicas` consecutive batches are stacked into one batch of
        `global / processes` rows, replica after replica, as the devices along the
        batch hold them. The distribution then does not shard it again.

        Args:
            dataset_fn: `input_context -> tf.data.Dataset` of per-replica batches (dicts or tuples of them).
            bi_data: the per-replica batches are `[forward half | backward half]`; the stacked
                batch then puts every replica's forward half first and every backward half
                after them (in replica order), the layout the backbone reads for a whole
                batch, so each row keeps the direction it had on its TensorFlow replica.

        Returns:
            A `tf.data.Dataset` of per-process batches.
        """
        import tensorflow as tf  # optional dependency: the data side, tf.data on every backend

        if bi_data and self.num_processes > 1:
            raise StrategyError(
                f"model.bi_data on JAX with {self.num_processes} processes: the backbone splits its whole "
                f"(global) batch into a forward and a backward half, which no process holds alone. Train "
                f"bi_data runs on one host, or with bi_data false.")
        dataset = dataset_fn(self.input_context())
        local = self.local_replicas
        if self.distribution is not None:
            self.distribution.auto_shard_dataset = False  # Each process already reads its own shard.
        if local == 1:
            return dataset

        # Consecutive per-replica batches go to consecutive replicas, as TensorFlow hands them out.
        dataset = dataset.batch(local, drop_remainder=True)
        return dataset.map(lambda *batch: tf.nest.map_structure(lambda t: _stack_rows(t, bi_data),
                                                                batch if len(batch) > 1 else batch[0]))

    def describe(self) -> dict:
        return dict(self.devices)


def _stack_rows(stacked, bi_data):
    """One process batch from its replicas' batches stacked `[R, b, ...]`: `[R * b, ...]`, replica after replica.

    With `bi_data`, every replica's forward half first, then every backward half.
    """
    import tensorflow as tf  # optional dependency: the data side, tf.data on every backend

    shape, static = tf.shape(stacked), stacked.shape
    rows = static[0] * static[1] if static[0] is not None and static[1] is not None else None
    rest = shape[2:]
    if bi_data:
        halves = tf.reshape(stacked, tf.concat([[shape[0], 2, shape[1] // 2], rest], 0))  # [R, 2, b/2, ...]
        stacked = tf.transpose(halves, [1, 0] + list(range(2, stacked.shape.rank + 1)))  # [2, R, b/2, ...]
    merged = tf.reshape(stacked, tf.concat([[-1], rest], 0))  # [R*b, ...]
    merged.set_shape([rows] + static[2:].as_list())  # Keras' JAX trainer traces one static shape.
    return merged


def resolve_jax_distribution(name="auto", *, virtual_cpu_devices=0, model_parallel=0, model_config=None,
                             tpu_host=None, environ=None) -> KerasDistributionStrategy:
    """Resolves `distribution.strategy` on JAX (see the module docstring).

    Args:
        name: one of `STRATEGIES`.
        virtual_cpu_devices: when > 0, split the CPU into that many JAX devices first.
        model_parallel: devices along the `model` axis of `model_parallel` (0: half of them,
            a `(2, N/2)` mesh on N devices; 1 device: `(1, 1)`).
        model_config: the backbone's `XLNetConfig` (`model_parallel` splits only dimensions that divide).
        tpu_host: the `TpuHost` to read (default: this machine's).
        environ: the environment (default `os.environ`): cluster variables.

    Returns:
        A `KerasDistributionStrategy`.

    Raises:
        StrategyError: an unknown name, no TPU for "tpu", TPU chips JAX cannot use, a mesh
            that does not fit the devices.
    """
    if name not in STRATEGIES:
        raise StrategyError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")
    host = TpuHost.detect() if tpu_host is None else tpu_host
    if virtual_cpu_devices:
        configure_virtual_cpu_devices(virtual_cpu_devices)
    if name == "multi_worker" and not cluster_requested(environ, host):
        _log.warning("multi_worker strategy without KERAS_DISTRIBUTION_* variables: running as a single process.")
    initialize_cluster(environ, host)

    def described(strategy, replicas, devices):
        return {"backend": "jax", "strategy": strategy, "replicas": int(replicas),
                "device_kind": device_kind(devices, host)}

    if name == "cpu":
        cpu = _jax_devices("cpu")[:1]
        accelerated = _accelerators(name, host)[0].platform != "cpu"
        distribution = BatchShardedDataParallel(devices=cpu) if accelerated else None
        return KerasDistributionStrategy(distribution, replicas=1, devices=described("SingleDevice", 1, cpu),
                                         device=cpu[0])
    devices = _accelerators(name, host)
    on_cpu = devices[0].platform == "cpu"
    if name == "one_device" or (name == "auto" and (len(devices) == 1 or (on_cpu and virtual_cpu_devices <= 1))):
        return KerasDistributionStrategy(None, replicas=1, devices=described("SingleDevice", 1, devices[:1]),
                                         device=devices[0])
    if name == "model_parallel":
        model = model_parallel or max(1, len(devices) // 2)
        if model < 0 or len(devices) % model:
            raise StrategyError(f"distribution.model_parallel must divide the {len(devices)} devices "
                                f"(0: half of them), got {model}.")
        mesh = keras.distribution.DeviceMesh(shape=(len(devices) // model, model), axis_names=(BATCH_AXIS, MODEL_AXIS),
                                             devices=devices)
        distribution = keras.distribution.ModelParallel(layout_map=backbone_layout_map(mesh, model_config),
                                                        batch_dim_name=BATCH_AXIS)
        return KerasDistributionStrategy(distribution, replicas=mesh.shape[0],
                                         devices=described(f"ModelParallel {mesh.shape[0]}x{model}", mesh.shape[0],
                                                           devices))
    distribution = BatchShardedDataParallel(devices=devices)
    return KerasDistributionStrategy(distribution, replicas=len(devices),
                                     devices=described("DataParallel", len(devices), devices))


def single_device(backend, name) -> KerasDistributionStrategy:
    """The placement of a backend without `keras.distribution` (PyTorch): one device, for the names that mean one."""
    if name not in ("auto", "one_device", "cpu"):
        raise StrategyError(f"--strategy {name} is not available on the {backend} backend (one device only); "
                            f"use --strategy auto, one_device or cpu, or --backend jax / tensorflow.")
    import torch  # optional dependency: the PyTorch backend's; its device is the one Keras trains on

    kind = "CPU" if name == "cpu" or not torch.cuda.is_available() else f"GPU {torch.cuda.get_device_name(0)}"
    return KerasDistributionStrategy(None, replicas=1, processes=(1, 0),
                                     devices={"backend": backend, "strategy": "SingleDevice", "replicas": 1,
                                              "device_kind": kind})


def keras_placement(backend, distribution, strategy, host, model_config) -> dict:
    """Where a run trains on JAX (`keras.distribution`) and PyTorch (one device): `RunSetup`'s fields but the
    batch sizes.

    The placement (unless `strategy` gives one), its replicas and this process.
    """
    if strategy is None and backend == "jax":
        strategy = resolve_jax_distribution(
            distribution.strategy, virtual_cpu_devices=distribution.virtual_cpu_devices,
            model_parallel=distribution.model_parallel, model_config=model_config, tpu_host=host)
    elif strategy is None:
        strategy = single_device(backend, distribution.strategy)
    return {"strategy": strategy, "replicas": strategy.num_replicas_in_sync, "task_id": strategy.process_id,
            "is_chief": strategy.process_id == 0, "devices": strategy.describe()}
