"""The work directory of a run, the same for pretraining and fine-tuning.

`check_workdir` refuses a work directory whose earlier run had another config
(before anything is built). `open_run_directory` then takes the directory for
this run: the run lock, `config.yaml`, and the backup to resume from, with the
`.bkp` fallback of `RunBackup`. Both runs use these, so a work directory
behaves the same whichever run wrote it:

    config.yaml   the fully resolved run config (written by the chief)
    backup/       RunBackup state; other workers of a multi-worker run keep theirs in backup/worker-N/
    RUN_LOCK      while a run is active: who holds the work directory (one run at a time)

Example:
>>> from xlnet_tf.training.run_directory import open_run_directory
>>> import contextlib
>>> with contextlib.ExitStack() as run_scope:
...     directory = open_run_directory("ram://doc/run", "a: 1\\n", run_scope)
...     directory.first_epoch, directory.backup_dir
(0, 'ram://doc/run/backup')
"""

import dataclasses
import logging
import os

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.storage.run_config_file import read_run_config, write_run_config
from xlnet_tf.training.run_backup import RunBackup
from xlnet_tf.storage.run_lock import RunLock
from xlnet_tf.training.run_backup import backup_epoch

_log = logging.getLogger(__name__)

BACKUP_DIR = "backup"

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
