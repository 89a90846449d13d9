"""Callbacks of a pretraining run: metrics log, checkpoints, recurrence memory state.

`fit` runs "epochs" that are checkpoint periods of `steps_per_epoch` optimizer
steps over an endless record stream; `first_epoch_step(epoch)` turns Keras'
epoch/batch counters into global steps.
"""

import json
import os
import time
import warnings
import zipfile

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from xlnet_tf.storage import atomic_files


class JsonlMetricsLogger(keras.callbacks.Callback):
    """Appends one JSON object per logged step to `path`: step, loss, accuracy, learning rate.

    `loss`/`accuracy` are Keras' running values since the start of the current
    epoch (what the progress bar shows); `examples_per_second` covers the steps
    since the previous line. On a resumed run, lines past the restored step are
    dropped first, so the file always describes one consistent history.

    Args:
        path: the `metrics.jsonl` file.
        steps_per_epoch: optimizer steps per Keras epoch.
        every_steps: log when the global step is a multiple of this (and at each epoch end).
        global_batch_size: examples per optimizer step, for the throughput column.
        micro_batches_per_step: `fit` batches per optimizer step (gradient accumulation).
    """

    def __init__(self, path, *, steps_per_epoch, every_steps, global_batch_size,
                 micro_batches_per_step=1):
        super().__init__()
        self.path = path
        self.steps_per_epoch = steps_per_epoch
        self.micro_batches_per_step = micro_batches_per_step
        self.every_steps = every_steps
        self.global_batch_size = global_batch_size
        self._epoch = 0
        self._last_step = None
        self._last_time = None

    def on_train_begin(self, logs=None):
        self._last_time = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        first = epoch * self.steps_per_epoch
        if self._last_step is None:
            truncate_jsonl(self.path, first)
            self._last_step = first

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self._epoch, batch, self.steps_per_epoch, self.micro_batches_per_step)
        if step is not None and (step % self.every_steps == 0 or step % self.steps_per_epoch == 0):
            self._write(step, logs)

    def _write(self, step, logs):
        if step == self._last_step or not logs:
            return
        now = time.time()
        record = {"step": int(step), "epoch": int(self._epoch)}
        for key, value in logs.items():
            try:
                record[key] = float(value)
            except (TypeError, ValueError):
                continue
        optimizer = self.model.optimizer
        if optimizer is not None:
            record["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        elapsed = now - self._last_time
        if elapsed > 0 and self._last_step is not None:
            record["examples_per_second"] = (step - self._last_step) * self.global_batch_size / elapsed
        record["time"] = now
        append_jsonl(self.path, record)
        self._last_step, self._last_time = step, now


def append_jsonl(path, record):
    """Appends `record` to the metrics file `path` as one JSON line.

    One short append per line; a kill mid-line leaves a fragment that the next run's
    `truncate_jsonl` drops.
    """
    with tf.io.gfile.GFile(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def optimizer_step(epoch, batch, steps_per_epoch, micro_batches_per_step=1):
    """The global optimizer step that `fit` batch `batch` of `epoch` completes, or None.

    With gradient accumulation only every `micro_batches_per_step`-th batch
    completes an update; the others return None.
    """
    if (batch + 1) % micro_batches_per_step:
        return None
    return epoch * steps_per_epoch + (batch + 1) // micro_batches_per_step


def truncate_jsonl(path, max_step):
    """Drops the lines of a metrics file whose step is past `max_step`, and unreadable lines.

    An unreadable line is what a run killed mid-append leaves (a fragment without
    its newline); it is dropped with a warning naming the file and line. The file
    is rewritten atomically, so a kill here loses nothing.
    """
    if not tf.io.gfile.exists(path):
        return
    lines = _metrics_lines(path)
    kept, dropped = [], []
    for number, (line, record) in enumerate(lines, 1):
        step = None if record is None else record.get("step", 0)
        if step is None:
            dropped.append(number)
        elif step <= max_step:
            kept.append(line)
    if dropped:
        warnings.warn(f"{path}: dropped unreadable line(s) {dropped} (left by an interrupted write).", stacklevel=2)
    if len(kept) != len(lines):
        atomic_files.write_text(path, "".join(line + "\n" for line in kept))


def read_metrics(path):
    """The records of a `metrics.jsonl` file in order, without unreadable lines; [] when there is no file.

    Example:
    >>> from xlnet_tf.training.callbacks import read_metrics
    >>> [record["loss"] for record in read_metrics("runs/tiny/metrics.jsonl")]  # doctest: +SKIP
    [8.29, 7.91, 7.40]
    """
    if not tf.io.gfile.exists(path):
        return []
    return [record for _, record in _metrics_lines(path) if record is not None]


def _metrics_lines(path):
    """`(line, record)` for each non-blank line of a metrics file; record None for an unreadable line."""
    with tf.io.gfile.GFile(path, "r") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        parsed.append((line, record if isinstance(record, dict) else None))
    return parsed


class TensorBoardScalars(keras.callbacks.Callback):
    """Writes the logged scalars as TensorBoard event files, without the `tensorboard` package.

    `keras.callbacks.TensorBoard` needs the `tensorboard` pip package for
    `tf.summary.scalar`; this callback writes the same scalar events with core
    TensorFlow ops (`tf.summary.write` and the "scalars" plugin metadata), so
    `tensorboard --logdir WORKDIR/logs` shows them wherever TensorBoard is installed.

    Args:
        log_dir: directory of the event files (`log_dir/train`).
        steps_per_epoch: optimizer steps per Keras epoch.
        every_steps: write when the global step is a multiple of this.
        micro_batches_per_step: `fit` batches per optimizer step (gradient accumulation).
    """

    def __init__(self, log_dir, *, steps_per_epoch, every_steps, micro_batches_per_step=1):
        super().__init__()
        self.log_dir = log_dir
        self.steps_per_epoch = steps_per_epoch
        self.micro_batches_per_step = micro_batches_per_step
        self.every_steps = every_steps
        self._epoch = 0
        self._writer = None

    def on_train_begin(self, logs=None):
        self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "train"))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self._epoch, batch, self.steps_per_epoch, self.micro_batches_per_step)
        if step is None:
            return
        if logs and (step % self.every_steps == 0 or step % self.steps_per_epoch == 0):
            values = dict(logs)
            if self.model.optimizer is not None:
                values["learning_rate"] = self.model.optimizer.learning_rate
            self.write(step, values)

    def write(self, step, values):
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        with self._writer.as_default():
            for key, value in values.items():
                try:
                    tensor = tf.cast(tf.convert_to_tensor(value), tf.float32)
                except (TypeError, ValueError):
                    continue
                tf.summary.write(key, tensor, step=step, metadata=metadata)
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()


class RecurrenceMemoryState(keras.callbacks.Callback):
    """Saves the recurrence memory with every backup and restores it on resume.

    At each epoch end it writes this process's per-replica memories to
    `backup_dir/recurrence_memory-{worker}-epoch-{N}.npz` (N = epochs done),
    keeping the newest two like RunBackup's double checkpoint. Put it
    before `RunBackup` in the callback list: then a memory file exists
    for every epoch a backup exists for. At train begin it restores the file of
    the epoch training resumes from; a fresh run starts from zeros. A resumed
    run whose memory file is missing or does not fit (e.g. another replica
    count) warns, naming the file and the reason, and starts from zeros.

    Args:
        backup_dir: the RunBackup directory.
        first_epoch: epochs already done (0 for a fresh run).
        first_step: `fit` batches (micro-batches) already done; the memory's step
            counter is aligned with it so data-epoch resets stay on schedule.
        each_epoch: also zero the memory at the start of every epoch.
        worker: this process's index among the workers (multi-worker runs).
    """

    KEEP = 2

    def __init__(self, backup_dir, *, first_epoch=0, first_step=0, each_epoch=False, worker=0):
        super().__init__()
        self.backup_dir = backup_dir
        self.first_epoch = first_epoch
        self.first_step = first_step
        self.each_epoch = each_epoch
        self.worker = worker
        self.restored_from = None

    def path(self, epochs_done):
        return os.path.join(self.backup_dir,
                            f"recurrence_memory-{self.worker}-epoch-{epochs_done:06d}.npz")

    def on_train_begin(self, logs=None):
        memory = self.model.recurrence_memory
        self.model.reset_recurrence_memory(step=self.first_step)
        if memory is None or self.first_epoch == 0:
            return
        path = self.path(self.first_epoch)
        if not tf.io.gfile.exists(path):
            warnings.warn(f"Resuming at epoch {self.first_epoch} without its recurrence memory "
                          f"({path} is missing); the memory starts from zeros.", stacklevel=2)
            return
        try:
            step = memory.restore(path)
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile,
                tf.errors.OpError) as error:
            # A damaged file (e.g. from a full disk) only costs the memory, never the run.
            self.model.reset_recurrence_memory(step=self.first_step)
            reason = str(error) if str(path) in str(error) else f"{path}: {error}"
            warnings.warn(f"Recurrence memory not restored: {reason} It starts from zeros.", stacklevel=2)
            return
        if step != self.first_step:
            self.model.reset_recurrence_memory(step=self.first_step)
            warnings.warn(f"{path} holds the memory of step {step}, training resumes at step "
                          f"{self.first_step}; the memory starts from zeros.", stacklevel=2)
            return
        self.restored_from = path

    def on_epoch_begin(self, epoch, logs=None):
        if self.each_epoch:
            self.model.reset_recurrence_memory()

    def on_epoch_end(self, epoch, logs=None):
        memory = self.model.recurrence_memory
        if memory is None:
            return
        tf.io.gfile.makedirs(self.backup_dir)
        memory.save(self.path(epoch + 1))
        if epoch + 1 - self.KEEP >= 0:
            memory.remove(self.path(epoch + 1 - self.KEEP))


class WeightsCheckpoint(keras.callbacks.Callback):
    """Saves the model (and optimizer) state to `directory/ckpt-{step:08d}.weights.h5` each epoch.

    Keeps the newest `keep` files. Each file is written atomically (a kill leaves
    the previous checkpoints and no partial file) and records its step as the
    HDF5 attribute `step`. These are the checkpoints `xlnet-tf export` reads
    (`latest_readable_checkpoint`); resuming uses the separate backup directory.

    Args:
        directory: the checkpoint directory (any `tf.io.gfile` path).
        steps_per_epoch: optimizer steps per Keras epoch.
        keep: how many of the newest checkpoints to keep (0: all).
    """

    def __init__(self, directory, *, steps_per_epoch, keep=3):
        super().__init__()
        self.directory = directory
        self.steps_per_epoch = steps_per_epoch
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps_per_epoch
        atomic_files.save_weights(self.model,
                                  os.path.join(self.directory, f"ckpt-{step:08d}.weights.h5"),
                                  attributes={"step": int(step)})
        for old in list_checkpoints(self.directory)[:-self.keep] if self.keep > 0 else []:
            tf.io.gfile.remove(old)


def list_checkpoints(directory):
    """`ckpt-*.weights.h5` files of `directory` (any `tf.io.gfile` path), oldest first.

    Temporaries of unfinished writes (`.tmp-*`) are never listed.
    """
    if not tf.io.gfile.isdir(directory):
        return []
    return sorted(tf.io.gfile.glob(os.path.join(directory, "ckpt-*.weights.h5")))


def latest_readable_checkpoint(directory):
    """The newest checkpoint of `directory` that passes the HDF5 integrity check, or None.

    Each newer one that fails (e.g. truncated by a full disk or a copy cut
    short) is skipped with a one-line warning naming it.
    """
    for path in reversed(list_checkpoints(directory)):
        problem = atomic_files.weights_file_problem(path)
        if problem is None:
            return path
        warnings.warn(f"Skipping unreadable checkpoint {path} ({problem}); using an older one.",
                      stacklevel=2)
    return None
