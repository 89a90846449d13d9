"""How every run starts: where it trains, on how many examples a step, and the work directory it takes.

Both runs start with `start_run` (which refuses a work directory whose earlier run had another
config, `check_workdir`, and resolves their `RunSetup`), so `distribution.*` and the two
batch-size keys mean the same in pretraining and fine-tuning. Both print `devices_line` at
start and record `devices` (strategy class, replicas, device kind) as the `devices` section of
their config.yaml. TensorFlow's strategies are `xlnet_tf.training.strategy`'s, JAX's and
PyTorch's placements `xlnet_tf.training.jax_distribution`'s.

`open_run_directory` then takes the work directory for the run: the run lock, `config.yaml`,
and the backup to resume from, with the `.bkp` fallback of `RunBackup`. Both runs use it, so a
work directory behaves the same whichever run wrote it:

    config.yaml   the fully resolved run config (written by the chief)
    backup/       RunBackup state; other workers of a multi-worker run keep theirs in backup/worker-N/
    RUN_LOCK      while a run is active: who holds the work directory (one run at a time)

Example:
>>> from xlnet_tf.training.run_setup import RunSetup
>>> from xlnet_tf.training.run_sections import DistributionSection, TrainingSection
>>> setup = RunSetup.resolve(DistributionSection(strategy="one_device"),
...                          TrainingSection(global_batch_size=8))
>>> setup.replicas, setup.global_batch_size, setup.per_replica_batch_size, setup.is_chief
(1, 8, 8, True)
>>> setup.devices
{'strategy': 'OneDeviceStrategy', 'replicas': 1, 'device_kind': 'CPU'}
>>> from xlnet_tf.training.run_setup import open_run_directory
>>> import contextlib
>>> with contextlib.ExitStack() as run_scope:
...     directory = open_run_directory("ram://doc/run", "a: 1\\n", run_scope)
...     directory.first_epoch, directory.backup_dir
(0, 'ram://doc/run/backup')
"""

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any

import yaml

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.storage.run_config_file import read_run_config, write_run_config
from xlnet_tf.storage.run_lock import RunLock
from xlnet_tf.training import strategy as strategies
from xlnet_tf.training.run_backup import RunBackup
from xlnet_tf.training.run_backup import backup_epoch
from xlnet_tf.training.strategy import devices_line
from xlnet_tf.training.tpu_host import TpuHost

_log = logging.getLogger(__name__)

BACKUP_DIR = "backup"

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


# Keys that may change between attempts on one work directory; any other change is refused,
# since a resumed run must continue the same training.
IGNORED_WHEN_RESUMING = frozenset({
    ("training", "verbose"),  # How much is printed; nothing about the training itself.
    # Where the data lives (records copied to another bucket, another TFDS cache): the
    # records' manifest and vocabulary checks still refuse other contents.
    ("data", "train_files"),
    ("data", "vocabulary"),
    ("task", "data_dir"),
    # Which devices run it: a backup holds weights, optimizer state and the step, which
    # resume under any strategy (the global batch, and so the data position, is unchanged).
    ("distribution", "strategy"),
    ("distribution", "tpu"),
    ("distribution", "model_parallel"),
})


def check_workdir(config: dict, workdir: str) -> None:
    """Refuses to resume a work directory whose earlier run had a different config.

    Args:
        config: this run's resolved config as a dict of sections (`config.to_dict()`).
        workdir: the work directory; one without a readable `config.yaml` passes.

    Raises:
        ConfigError: naming every changed key with its old and new value.
    """
    previous = read_run_config(workdir)  # None: no earlier run, or a damaged file (warned).
    if previous is None:
        return
    changed = []
    for section, values in config.items():
        if not isinstance(values, dict):
            continue
        old = previous.get(section, {}) or {}
        for key, value in values.items():
            if (section, key) not in IGNORED_WHEN_RESUMING and key in old and old[key] != value:
                changed.append(f"{section}.{key}: {old[key]!r} -> {value!r}")
    if changed:
        raise ConfigError(f"{workdir} holds a run with a different config ({'; '.join(changed)}). "
                          "Use a new --workdir, or the original settings to resume.")


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """A work directory taken by this run (see `open_run_directory`).

    Attributes:
        workdir: the work directory.
        backup_dir: where this process's `RunBackup` keeps its backups.
        first_epoch: the epoch the run resumes at (0: a fresh start), the same choice
            as `RunBackup`'s, `.bkp` fallback included, so the data position always
            matches the restored weights.
    """

    workdir: str
    backup_dir: str
    first_epoch: int

    def backup_callback(self):
        """The `RunBackup` callback of this run: one backup per epoch, the previous kept as `.bkp`."""
        return RunBackup(self.backup_dir, save_freq="epoch", delete_checkpoint=False,
                         double_checkpoint=True)

    def announce_resume(self, steps_per_epoch: int, train_steps: int, is_chief: bool = True) -> None:
        """Says that the run resumes, and at which step (printed by the chief); nothing on a fresh start."""
        if not self.first_epoch:
            return
        step = self.first_epoch * steps_per_epoch
        _log.info("Resuming %s at step %d (epoch %d).", self.workdir, step, self.first_epoch)
        if is_chief:
            print(f"Resuming at step {step} of {train_steps} (backup in {self.backup_dir}).")


def open_run_directory(workdir: str, config_yaml: str, run_scope, *, is_chief: bool = True,
                       task_id: int = 0, steps: tuple[int, int] | None = None) -> RunDirectory:
    """Takes `workdir` for this run: lock, `config.yaml`, and the backup to resume from.

    Call it after every check that can refuse the run and before the first write:
    a second run on the same directory stops here with a `RunLockedError` naming
    this one.

    Args:
        workdir: the work directory (created if needed).
        config_yaml: the resolved config to write as `config.yaml` (chief only).
        run_scope: a `contextlib.ExitStack` that releases the lock when the run ends.
        is_chief: whether this process is the chief (it alone locks and writes).
        task_id: this worker's index (non-chief workers back up into `backup/worker-N`).
        steps: the run's `(steps_per_epoch, train_steps)`: a resumed run says at which
            step it resumes (`RunDirectory.announce_resume`).

    Returns:
        A `RunDirectory`.
    """
    run_scope.enter_context(RunLock(workdir, enabled=is_chief))
    if is_chief:
        write_run_config(workdir, config_yaml)
    backup_dir = os.path.join(workdir, BACKUP_DIR)
    if not is_chief:
        backup_dir = os.path.join(backup_dir, f"worker-{task_id}")
    directory = RunDirectory(workdir=workdir, backup_dir=backup_dir, first_epoch=backup_epoch(backup_dir))
    if steps is not None:
        directory.announce_resume(*steps, is_chief=is_chief)
    return directory
