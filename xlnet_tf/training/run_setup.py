"""Where a run trains and on how many examples a step: strategy, replicas, batch sizes, this worker.

Both runs start with `start_run` (which resolves their `RunSetup`), so `distribution.*`
and the two batch-size keys mean the same in pretraining and fine-tuning. Both print
`devices_line` at start and record `devices` (strategy class, replicas, device
kind) as the `devices` section of their config.yaml. TensorFlow's strategies are
`xlnet_tf.training.strategy`'s, JAX's and PyTorch's placements
`xlnet_tf.training.jax_distribution`'s.

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
from xlnet_tf.training.run_directory import check_workdir
from xlnet_tf.training.strategy import devices_line
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
            # import time: jax_distribution imports Keras, which fixes its backend once imported
            from xlnet_tf.training import jax_distribution

            placement = jax_distribution.keras_placement(backend, distribution, strategy, host, model_config)
        else:
            placement = strategies.tensorflow_placement(distribution, strategy, paths or {}, host)
        global_batch, per_replica = strategies.resolve_batch_sizes(
            global_batch_size=training.global_batch_size, per_replica_batch_size_value=training.per_replica_batch_size,
            num_replicas=placement["replicas"], num_processes=getattr(placement["strategy"], "num_processes", 1))
        return cls(**placement, global_batch_size=global_batch, per_replica_batch_size=per_replica)

    @property
    def backend(self) -> str:
        """The Keras backend this run trains on."""
        return (self.devices or {}).get("backend", "tensorflow")

    @property
    def per_process_batch_size(self) -> int:
        """Rows each process's input pipeline yields per step (the global batch on one process)."""
        return self.global_batch_size // getattr(self.strategy, "num_processes", 1)

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


def start_run(config, workdir: str, run_scope, strategy=None, *, paths: Mapping[str, Any],
              model_config=None) -> RunSetup:
    """The first steps of every run, before its own checks and its first write.

    Refuses a work directory whose earlier run had another config (`check_workdir`),
    resolves the run's `RunSetup`, prints where it trains (the chief's `devices_line`)
    and, on JAX and PyTorch, enters the `keras.distribution` scope for the rest of the
    run: it places variables when they are created and data when `fit` reads it.

    Args:
        config: the run's validated config (`distribution`, `training` sections; `to_dict()`).
        workdir: the work directory.
        run_scope: a `contextlib.ExitStack` that holds the run's scopes until the run ends.
        strategy: a strategy to use instead of resolving `config.distribution`.
        paths: the run's data paths and work directory, for `RunSetup.resolve`.
        model_config: the backbone's `XLNetConfig`, for `RunSetup.resolve`.

    Raises:
        ConfigError: the work directory holds a run with another config.
        StrategyError: as `RunSetup.resolve`.
    """
    check_workdir(config.to_dict(), workdir)
    setup = RunSetup.resolve(config.distribution, config.training, strategy, paths=paths,
                             model_config=model_config)
    if setup.is_chief:
        print(devices_line(setup.devices))
    if setup.backend != "tensorflow":
        run_scope.enter_context(setup.strategy.scope())
    return setup
