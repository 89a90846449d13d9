"""Per-replica recurrence memory that survives from one `fit` step to the next."""

import io

import numpy as np
import tensorflow as tf

from xlnet_tf.storage import atomic_files


class RecurrenceMemory:
    """The Transformer-XL memory of each replica, kept in an on-read-synchronised variable.

    Every replica owns one copy of a `[per_replica_batch, num_layers, memory_length,
    hidden_dim]` buffer (a `SyncOnReadVariable`: no cross-replica traffic on
    write). In a replica context, `read()` returns that replica's copy and
    `write()` replaces it, so row i of a replica's step t+1 attends to row i of
    the same replica's step t. This is the mechanism Keras uses for metric
    state and it works the same under MirroredStrategy, MultiWorkerMirrored and
    TPUStrategy, inside `steps_per_execution` loops and XLA.

    The buffer is deliberately not a Keras weight: it depends on the batch size,
    would be wrong to average across replicas, and must not end up in presets
    or weight files. `save()`/`restore()` keep it next to the run's backup
    instead (see `xlnet_tf.training.callbacks.RecurrenceMemoryState`), so a
    resumed run continues with the memory it had.

    Args:
        per_replica_batch_size: rows per replica per step.
        num_layers: backbone layers.
        memory_length: cached positions per layer.
        hidden_dim: backbone width.
        dtype: storage dtype (the backbone's compute dtype).
        strategy: where to create the variable (default: the current strategy).
        reset_every_steps: when > 0, `read()` returns zeros at every step whose
            index (counted by `write()`) is a multiple of it, e.g. where the data
            streams start a new epoch.

    Example:
    >>> memory = RecurrenceMemory(per_replica_batch_size=2, num_layers=1, memory_length=3,
    ...                           hidden_dim=4)
    >>> memory.local_values()[0].shape
    (2, 1, 3, 4)
    """

    def __init__(self, *, per_replica_batch_size, num_layers, memory_length, hidden_dim,
                 dtype="float32", strategy=None, reset_every_steps=0):
        if per_replica_batch_size < 1 or memory_length < 1:
            raise ValueError(
                f"RecurrenceMemory needs per_replica_batch_size >= 1 and memory_length >= 1, got "
                f"{per_replica_batch_size} and {memory_length}.")
        self.shape = (per_replica_batch_size, num_layers, memory_length, hidden_dim)
        self.dtype = tf.as_dtype(dtype)
        self.strategy = strategy or tf.distribute.get_strategy()
        with self.strategy.scope():
            self.variable = tf.Variable(
                tf.zeros(self.shape, self.dtype), trainable=False, name="recurrence_memory",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.step = tf.Variable(
                tf.constant(0, tf.int32), trainable=False, name="recurrence_memory_step",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.reset_every_steps = int(reset_every_steps)

    def read(self):
        """This replica's memory, `[B, num_layers, M, H]` (call in a replica context)."""
        memory = tf.identity(self.variable)
        if self.reset_every_steps > 0:
            fresh = tf.equal(tf.math.floormod(tf.identity(self.step), self.reset_every_steps), 0)
            memory = tf.where(fresh, tf.zeros_like(memory), memory)
        return memory

    def write(self, new_memory):
        """Replaces this replica's memory with `new_memory` (gradient stopped)."""
        new_memory = tf.stop_gradient(tf.cast(new_memory, self.dtype))
        if tuple(new_memory.shape) != self.shape:
            raise ValueError(
                f"RecurrenceMemory: new memory has shape {tuple(new_memory.shape)}, the buffer "
                f"holds {self.shape} (per-replica batch, layers, memory_length, hidden).")
        self.step.assign_add(1)
        return self.variable.assign(new_memory)

    def reset(self, step=None):
        """Zeros every replica's memory (call outside `strategy.run`, e.g. from a callback).

        Args:
            step: when given, the global step the next `write()` belongs to.
        """
        self.variable.assign(tf.zeros(self.shape, self.dtype))
        if step is not None:
            self.step.assign(tf.constant(int(step), tf.int32))

    def save(self, path):
        """Writes this process's per-replica memories and step counter to `path` (.npz), atomically."""
        values = self.local_values()
        step = int(self.strategy.experimental_local_results(self.step)[0].numpy())
        buffer = io.BytesIO()  # np.savez seeks, which GFile (gs://) writers cannot.
        np.savez(buffer, step=np.int64(step), shape=np.asarray(self.shape, np.int64),
                 **{f"replica_{i}": value for i, value in enumerate(values)})
        atomic_files.write_bytes(path, buffer.getvalue())

    def restore(self, path):
        """Loads what `save()` wrote; raises ValueError naming the mismatch when it cannot.

        Returns:
            The restored step counter.
        """
        with tf.io.gfile.GFile(path, "rb") as f:
            stored = np.load(io.BytesIO(f.read()))
            components = self.strategy.experimental_local_results(self.variable)
            names = sorted((k for k in stored.files if k.startswith("replica_")),
                           key=lambda k: int(k.split("_")[1]))
            if len(names) != len(components):
                raise ValueError(f"{path}: memory of {len(names)} local replica(s), this run has "
                                 f"{len(components)}.")
            stored_shape = tuple(int(n) for n in stored["shape"])
            if stored_shape != self.shape:
                raise ValueError(f"{path}: memory of shape {stored_shape} (per-replica "
                                 f"batch, layers, memory_length, hidden), this run needs {self.shape}.")
            for component, name in zip(components, names):
                component.assign(tf.constant(stored[name], self.dtype))
            step = int(stored["step"])
        for component in self.strategy.experimental_local_results(self.step):
            component.assign(tf.constant(step, tf.int32))
        return step

    @staticmethod
    def remove(path):
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)

    def local_values(self):
        """This process's per-replica memories as numpy arrays, replica order."""
        return [v.numpy() for v in self.strategy.experimental_local_results(self.variable)]
