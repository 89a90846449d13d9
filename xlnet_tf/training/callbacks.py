"""Callbacks of a pretraining run: metrics log, checkpoints, memory resets.

`fit` runs "epochs" that are checkpoint periods of `steps_per_epoch` optimizer
steps over an endless record stream; `first_epoch_step(epoch)` turns Keras'
epoch/batch counters into global steps.
"""

import glob
import json
import os
import time

import keras


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
        global_batch_size: examples per step, for the throughput column.
    """

    def __init__(self, path, *, steps_per_epoch, every_steps, global_batch_size):
        super().__init__()
        self.path = path
        self.steps_per_epoch = steps_per_epoch
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
        step = self._epoch * self.steps_per_epoch + batch + 1
        if step % self.every_steps == 0 or step % self.steps_per_epoch == 0:
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
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        self._last_step, self._last_time = step, now


def truncate_jsonl(path, max_step):
    """Drops the lines of a metrics file whose step is past `max_step`."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    kept = [line for line in lines if json.loads(line).get("step", 0) <= max_step]
    if len(kept) != len(lines):
        with open(path, "w") as f:
            f.writelines(kept)


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
    """

    def __init__(self, log_dir, *, steps_per_epoch, every_steps):
        super().__init__()
        self.log_dir = log_dir
        self.steps_per_epoch = steps_per_epoch
        self.every_steps = every_steps
        self._epoch = 0
        self._writer = None

    def on_train_begin(self, logs=None):
        import tensorflow as tf

        self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "train"))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        step = self._epoch * self.steps_per_epoch + batch + 1
        if logs and (step % self.every_steps == 0 or step % self.steps_per_epoch == 0):
            values = dict(logs)
            if self.model.optimizer is not None:
                values["learning_rate"] = self.model.optimizer.learning_rate
            self.write(step, values)

    def write(self, step, values):
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2

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


class RecurrenceMemoryReset(keras.callbacks.Callback):
    """Zeros the pretrainer's recurrence memory at train begin (and optionally every epoch).

    A restarted run does not restore the memory (see `RecurrenceMemory`); zeroing it
    at train begin makes a fresh and a resumed run start the same way.

    Args:
        each_epoch: also reset at the start of every epoch.
        first_step: the global step training (re)starts from; the memory's step
            counter is aligned with it so data-epoch resets stay on schedule.
    """

    def __init__(self, each_epoch=False, first_step=0):
        super().__init__()
        self.each_epoch = each_epoch
        self.first_step = first_step

    def on_train_begin(self, logs=None):
        self.model.reset_recurrence_memory(step=self.first_step)

    def on_epoch_begin(self, epoch, logs=None):
        if self.each_epoch:
            self.model.reset_recurrence_memory()


class WeightsCheckpoint(keras.callbacks.Callback):
    """Saves the model (and optimizer) state to `directory/ckpt-{step:08d}.weights.h5` each epoch.

    Keeps the newest `keep` files. These are the checkpoints `xlnet-tf export`
    reads; resuming uses the separate BackupAndRestore directory.
    """

    def __init__(self, directory, *, steps_per_epoch, keep=3):
        super().__init__()
        self.directory = directory
        self.steps_per_epoch = steps_per_epoch
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        step = (epoch + 1) * self.steps_per_epoch
        self.model.save_weights(os.path.join(self.directory, f"ckpt-{step:08d}.weights.h5"))
        for old in list_checkpoints(self.directory)[:-self.keep] if self.keep > 0 else []:
            os.remove(old)


def list_checkpoints(directory):
    """`ckpt-*.weights.h5` files of `directory`, oldest first."""
    return sorted(glob.glob(os.path.join(directory, "ckpt-*.weights.h5")))
