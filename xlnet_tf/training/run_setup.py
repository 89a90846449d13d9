"""Where a run trains and on how many examples a step: strategy, replicas, batch sizes, this worker.

Both runs start with `RunSetup.resolve(config)`, so `distribution.*` and the two
batch-size keys mean the same in pretraining and fine-tuning. Both print
`devices_line` at start and record `devices` (strategy class, replicas, device
kind) as the `devices` section of their config.yaml.

Example:
>>> from xlnet_tf.training.run_setup import RunSetup
>>> from xlnet_tf.training.run_sections import DistributionSection, TrainingSection
>>> setup = RunSetup.resolve(DistributionSection(strategy="one_device"),
...                          TrainingSection(global_batch_size=8))
>>> setup.replicas, setup.global_batch_size, setup.per_replica_batch_size, setup.is_chief
(1, 8, 8, True)
>>> setup.devices
{'strategy': 'OneDeviceStrategy', 'replicas': 1, 'device_kind': 'CPU'}
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from xlnet_tf.training import strategy as strategies
from xlnet_tf.training.strategy import (check_remote_tpu_paths, describe_devices, devices_line, resolve_batch_sizes,
                                       task_info, tpu_target)
from xlnet_tf.training.strategy import StrategyError
from xlnet_tf.training.tpu_host import TpuHost

# The config.yaml section recording where a run trained (output, not a setting; see
# `xlnet_tf.training.run_sections.RUN_RECORD_SECTIONS`).
DEVICES_SECTION = "devices"


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """The strategy of a run and the batch arithmetic under it.

    Attributes:
        strategy: the `tf.distribute.Strategy`.
        replicas: `strategy.num_replicas_in_sync`.
        global_batch_size: examples per step over all replicas (one micro-batch).
        per_replica_batch_size: examples per step on each replica.
        task_id: this worker's index in TF_CONFIG (0 without one).
        is_chief: whether this process writes the run's files.
        devices: `describe_devices(strategy)`: strategy class, replicas, device kind.
    """

    strategy: Any
    replicas: int
    global_batch_size: int
    per_replica_batch_size: int
    task_id: int
    is_chief: bool
    devices: dict | None = None

    @classmethod
    def resolve(cls, distribution, training, strategy=None, *,
                paths: Mapping[str, Any] | None = None, tpu_host=None, model_config=None) -> "RunSetup":
        """Resolves the strategy (unless given) and splits the batch over its replicas.

        On TensorFlow the strategy is a `tf.distribute.Strategy`; on JAX a
        `xlnet_tf.training.jax_distribution.KerasDistributionStrategy` (a
        `keras.distribution` and the same `scope()`, `num_replicas_in_sync` and
        `distribute_datasets_from_function`); on PyTorch one device.

        Args:
            distribution: the run's `DistributionSection`.
            training: the run's `TrainingSection` (`global_batch_size` or
                `per_replica_batch_size`).
            strategy: a strategy to use instead of resolving `distribution`.
            paths: the run's data paths and work directory (`{"workdir": ...}`): a TPU
                reached by name needs them on gs://, checked before connecting to it.
            tpu_host: the `TpuHost` to read (default: this machine's).
            model_config: the backbone's `XLNetConfig`: which dimensions `model_parallel` splits (JAX).

        Raises:
            StrategyError: the strategy cannot be set up, a TPU reached by name gets a
                local path, or the batch does not split evenly.
        """
        host = TpuHost.detect() if tpu_host is None else tpu_host
        backend = keras_backend()
        if backend != "tensorflow":
            return cls._resolve_keras_distribution(backend, distribution, training, strategy, host, model_config)
        if strategy is None:
            if distribution.strategy in ("auto", "tpu"):
                check_remote_tpu_paths(tpu_target(distribution.tpu, host), paths or {})
            strategy = strategies.resolve_strategy(distribution.strategy,
                                        virtual_cpu_devices=distribution.virtual_cpu_devices,
                                        tpu_address=distribution.tpu, tpu_host=host)
        replicas = strategy.num_replicas_in_sync
        global_batch, per_replica = resolve_batch_sizes(
            global_batch_size=training.global_batch_size,
            per_replica_batch_size_value=training.per_replica_batch_size, num_replicas=replicas)
        _, task_id, is_chief = task_info()
        return cls(strategy=strategy, replicas=replicas, global_batch_size=global_batch,
                   per_replica_batch_size=per_replica, task_id=task_id, is_chief=is_chief,
                   devices=describe_devices(strategy, host))

    @classmethod
    def _resolve_keras_distribution(cls, backend, distribution, training, strategy, host, model_config):
        """`resolve` on JAX (`keras.distribution`) and PyTorch (one device)."""
        # import time: jax_distribution imports Keras, which fixes its backend once imported
        from xlnet_tf.training import jax_distribution

        if strategy is None and backend == "jax":
            strategy = jax_distribution.resolve_jax_distribution(
                distribution.strategy, virtual_cpu_devices=distribution.virtual_cpu_devices,
                model_parallel=distribution.model_parallel, model_config=model_config,
                tpu_host=host)
        elif strategy is None:
            strategy = _single_device(backend, distribution.strategy)
        global_batch, per_replica = resolve_batch_sizes(
            global_batch_size=training.global_batch_size,
            per_replica_batch_size_value=training.per_replica_batch_size,
            num_replicas=strategy.num_replicas_in_sync)
        jax_distribution.check_batch_split(global_batch, strategy)
        return cls(strategy=strategy, replicas=strategy.num_replicas_in_sync, global_batch_size=global_batch,
                   per_replica_batch_size=per_replica, task_id=strategy.process_id,
                   is_chief=strategy.process_id == 0, devices=strategy.describe())

    @property
    def backend(self) -> str:
        """The Keras backend this run trains on."""
        return (self.devices or {}).get("backend", "tensorflow")

    @property
    def per_process_batch_size(self) -> int:
        """Rows each process's input pipeline yields per step (the global batch on one process)."""
        return self.global_batch_size // getattr(self.strategy, "num_processes", 1)

    def announce(self) -> None:
        """Prints `devices_line` (the chief only): where this run trains."""
        if self.is_chief:
            print(devices_line(self.devices))

    def devices_yaml(self) -> str:
        """The `devices` section of config.yaml: strategy class, replicas, device kind."""
        return yaml.safe_dump({DEVICES_SECTION: self.devices}, sort_keys=False)

    def summary(self, history, *, first_step: int, train_steps: int) -> dict:
        """The summary dict a run returns: replicas, batch sizes, steps and the final logs of `fit`."""
        return {"replicas": self.replicas, "global_batch_size": self.global_batch_size,
                "per_replica_batch_size": self.per_replica_batch_size, "first_step": first_step,
                "train_steps": train_steps,
                "final": {k: float(v[-1]) for k, v in history.history.items() if v}}


def keras_backend() -> str:
    """The Keras backend of this process (Keras' own answer; `KERAS_BACKEND` before Keras is imported)."""
    import keras  # import time: Keras fixes its backend when imported, so only once the run chose it

    return keras.config.backend()


def _single_device(backend, name):
    """The placement of a backend without `keras.distribution` (PyTorch): one device, for the names that mean one."""
    from xlnet_tf.training.jax_distribution import KerasDistributionStrategy  # import time: it imports Keras

    if name not in ("auto", "one_device", "cpu"):
        raise StrategyError(f"--strategy {name} is not available on the {backend} backend (one device only); "
                            f"use --strategy auto, one_device or cpu, or --backend jax / tensorflow.")
    import torch  # optional dependency: the PyTorch backend's; its device is the one Keras trains on

    kind = "CPU" if name == "cpu" or not torch.cuda.is_available() else f"GPU {torch.cuda.get_device_name(0)}"
    return KerasDistributionStrategy(None, replicas=1, processes=(1, 0),
                                     devices={"backend": backend, "strategy": "SingleDevice", "replicas": 1,
                                              "device_kind": kind})
