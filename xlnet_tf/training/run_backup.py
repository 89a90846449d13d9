"""A crash-safe `BackupAndRestore`: atomic backups, fallback to the previous one, never stuck.

Keras' `BackupAndRestore` writes `latest.weights.h5` in place: a kill during the
first backup leaves a truncated HDF5 file and every rerun fails with
`OSError: Unable to synchronously open file`. `RunBackup` writes every file
atomically, records the epoch inside the weights file, and on resume picks
the newest readable backup (`select_backup`), which is also what
`backup_epoch` reports to the run that builds the input pipeline.
"""

import contextlib
import dataclasses
import json
import logging
import os
import warnings

import keras
import tensorflow as tf

from xlnet_tf.storage import atomic_files

_log = logging.getLogger(__name__)

WEIGHTS_FILE = "latest.weights.h5"
METADATA_FILE = "training_metadata.json"
PREVIOUS_SUFFIX = ".bkp"
# Stored in the weights file itself, so weights and epoch can never come from different backups.
EPOCH_ATTRIBUTE = "xlnet_backup_epoch"
BATCH_ATTRIBUTE = "xlnet_backup_batch"

_integrity_cache = {}


@dataclasses.dataclass(frozen=True)
class BackupChoice:
    """The backup a run resumes from.

    Attributes:
        weights: the weights file to restore, or None (start fresh).
        epoch: epochs done in that backup (0 when none).
        problems: one phrase per backup file that could not be used, naming it.
        unreadable: weights files that failed the integrity check.
    """

    weights: str = None
    epoch: int = 0
    problems: tuple = ()
    unreadable: tuple = ()

    def warning(self, backup_dir):
        """The one-line warning for the user, or None when nothing was wrong."""
        if not self.problems:
            return None
        if self.weights:
            outcome = f"resuming from {self.weights} (epoch {self.epoch}) instead"
        else:
            outcome = f"no readable backup left in {backup_dir}: training starts from step 0"
        return f"Backup not usable: {'; '.join(self.problems)}; {outcome}."


def _problem(path):
    """`weights_file_problem` cached by (path, size, mtime): the run and its callback both ask."""
    try:
        stat = tf.io.gfile.stat(path)
        key = (path, stat.length, stat.mtime_nsec)
    except tf.errors.OpError:
        key = None
    if key is not None and key in _integrity_cache:
        return _integrity_cache[key]
    problem = atomic_files.weights_file_problem(path)
    if key is not None:
        _integrity_cache[key] = problem
    return problem


def _epoch_of(weights, metadata):
    """(epoch, problem): the epoch recorded in `weights`, else in its paired `metadata` file."""
    try:
        attributes = atomic_files.weights_file_attributes(weights)
    except (OSError, tf.errors.OpError) as error:
        return None, f"{weights} is unreadable ({error})"
    if EPOCH_ATTRIBUTE in attributes:
        return int(attributes[EPOCH_ATTRIBUTE]), None
    # Written by keras.callbacks.BackupAndRestore (an older run): the epoch is in the metadata.
    if not tf.io.gfile.exists(metadata):
        return None, f"{metadata} is missing"
    try:
        return int(atomic_files.read_json(metadata)["epoch"]), None
    except (ValueError, KeyError, TypeError, tf.errors.OpError) as error:
        return None, f"{metadata} is unreadable ({type(error).__name__}: {error})"


def select_backup(backup_dir):
    """The newest usable backup in `backup_dir`: `latest.weights.h5`, else its `.bkp`.

    A weights file is usable when it passes the HDF5 integrity check and its
    epoch is known (recorded in the file by `RunBackup`; for backups of Keras'
    own callback, in the paired `training_metadata.json[.bkp]`).

    Returns:
        A `BackupChoice`.
    """
    latest = os.path.join(backup_dir, WEIGHTS_FILE)
    metadata = os.path.join(backup_dir, METADATA_FILE)
    problems, unreadable = [], []
    for weights, meta in ((latest, metadata),
                          (latest + PREVIOUS_SUFFIX, metadata + PREVIOUS_SUFFIX)):
        if not tf.io.gfile.exists(weights):
            continue
        problem = _problem(weights)
        if problem:
            problems.append(f"{weights} is unreadable ({problem})")
            unreadable.append(weights)
            continue
        epoch, problem = _epoch_of(weights, meta)
        if problem:
            problems.append(problem)
            continue
        return BackupChoice(weights, epoch, tuple(problems), tuple(unreadable))
    return BackupChoice(None, 0, tuple(problems), tuple(unreadable))


def backup_epoch(backup_dir):
    """The epoch `RunBackup` will restore from `backup_dir` (0 when there is no usable backup)."""
    return select_backup(backup_dir).epoch


class RunBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backups survive a kill at any moment.

    Saving: the previous backup pair becomes `latest.weights.h5.bkp` /
    `training_metadata.json.bkp` by renaming complete files, then the new
    weights (with the epoch recorded inside the file) and then the metadata
    are written atomically (`xlnet_tf.storage.atomic_files`). Restoring: the
    newest backup that passes the HDF5 integrity check (`select_backup`); an
    unreadable one is named in a one-line warning and removed; with no usable
    backup at all the run starts fresh with a warning instead of crashing.

    Args:
        backup_dir: directory of the backup files (one run only).
        save_freq: `"epoch"` or a number of batches, as in Keras.
        double_checkpoint: keep the previous backup as `.bkp` (default True).
        delete_checkpoint: delete `backup_dir` when training ends (default False).

    Example:
    >>> from xlnet_tf.training.run_backup import RunBackup
    >>> callback = RunBackup("ram://doc/backup")
    >>> callback.double_checkpoint
    True
    """

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint=True,
                 delete_checkpoint=False):
        super().__init__(backup_dir, save_freq=save_freq, double_checkpoint=double_checkpoint,
                         delete_checkpoint=delete_checkpoint)
        self.restored_from = None

    def on_train_begin(self, logs=None):
        if not self.model.built:
            raise ValueError(f"RunBackup needs a built model before fit() (model {self.model.name}).")
        choice = select_backup(self.backup_dir)
        message = choice.warning(self.backup_dir)
        if message:
            warnings.warn(message, stacklevel=2)
        for bad in choice.unreadable:
            # Never promoted to .bkp by the next save; the warning above named it.
            with contextlib.suppress(tf.errors.OpError):
                tf.io.gfile.remove(bad)
        if choice.weights is None:
            return
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        weights = choice.weights
        if weights != self._weights_path:
            # Keras loads only names ending in `.weights.h5`: the good `.bkp` becomes latest again.
            weights = atomic_files.copy_file(weights, self._weights_path)
            _integrity_cache.clear()
        self.model.load_weights(weights)
        self.model._initial_epoch = choice.epoch
        self.restored_from = choice.weights

    def _save_model(self):
        tf.io.gfile.makedirs(self.backup_dir)
        if self.double_checkpoint:
            # Renames of complete files; since each weights file carries its epoch, a kill
            # between them still leaves a consistent backup to resume from.
            for latest, previous in ((self._weights_path, self._prev_weights_path),
                                     (self._training_metadata_path,
                                      self._prev_training_metadata_path)):
                if tf.io.gfile.exists(latest):
                    tf.io.gfile.rename(latest, previous, overwrite=True)
        atomic_files.save_weights(self.model, self._weights_path, attributes={
            EPOCH_ATTRIBUTE: int(self._current_epoch), BATCH_ATTRIBUTE: int(self._last_batch_seen)})
        atomic_files.write_text(self._training_metadata_path, json.dumps(
            {"epoch": int(self._current_epoch), "batch": int(self._last_batch_seen)}))
