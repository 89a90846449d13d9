"""Per-replica recurrence memory that survives from one `fit` step to the next."""

import io

import keras
import numpy as np
from keras import ops

from xlnet_tf.storage import atomic_files


class RecurrenceMemory:
    """The Transformer-XL memory of each replica, kept in a non-trainable variable.

    A `[per_replica_batch, num_layers, memory_length, hidden_dim]` buffer and
    the count of its writes. `read()` returns the buffer and `write()` replaces
    it, so row i of step t+1 attends to row i of step t.

    - TensorFlow: every replica owns one copy (an on-read-synchronised
      `tf.Variable`: no cross-replica traffic on write), and in a replica
      context `read()`/`write()` use that replica's copy. This is the
      mechanism Keras uses for metric state and it works the same under
      MirroredStrategy, MultiWorkerMirrored and TPUStrategy, inside
      `steps_per_execution` loops and XLA.
    - JAX and PyTorch: one program per process, so one copy, held in Keras
      variables (`variable`, `step`). The model that reads and writes it in
      `call` tracks both as its non-trainable state (see
      `XLNetPretrainer.enable_recurrence_memory`): Keras' JAX trainer then
      carries the values written in one jitted step into the next.

    The buffer is deliberately not a weight: it depends on the batch size,
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
        strategy: TensorFlow only: where to create the variable (default: the
            current strategy). JAX and PyTorch take None.
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
        self.reset_every_steps = int(reset_every_steps)
        if _on_tensorflow():
            self._create_replica_variables(dtype, strategy)
            return
        if strategy is not None:
            raise ValueError(f"RecurrenceMemory: strategy is for TensorFlow's tf.distribute; on "
                             f"{keras.config.backend()} pass None (got {type(strategy).__name__}).")
        self.dtype = keras.backend.standardize_dtype(dtype)
        self.strategy = None
        self.variable = keras.Variable(ops.zeros(self.shape, self.dtype), dtype=self.dtype, trainable=False,
                                       name="recurrence_memory")
        self.step = keras.Variable(0, dtype="int32", trainable=False, name="recurrence_memory_step")

    def _create_replica_variables(self, dtype, strategy):
        import tensorflow as tf

        self.dtype = tf.as_dtype(dtype)
        self.strategy = strategy or tf.distribute.get_strategy()
        # On-read variables: one copy per replica, written without cross-replica traffic.
        with self.strategy.scope():
            self.variable = tf.Variable(
                tf.zeros(self.shape, self.dtype), trainable=False, name="recurrence_memory",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.step = tf.Variable(
                tf.constant(0, tf.int32), trainable=False, name="recurrence_memory_step",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def read(self):
        """This replica's memory, `[B, num_layers, M, H]` (on TensorFlow, call in a replica context)."""
        if _on_tensorflow():
            import tensorflow as tf

            # tf.identity reads this replica's copy of the on-read variable.
            memory = tf.identity(self.variable)
            if self.reset_every_steps > 0:
                fresh = tf.equal(tf.math.floormod(tf.identity(self.step), self.reset_every_steps), 0)
                memory = tf.where(fresh, tf.zeros_like(memory), memory)
            return memory
        memory = ops.convert_to_tensor(self.variable)  # [B, num_layers, M, H]
        if self.reset_every_steps > 0:
            fresh = ops.equal(ops.mod(ops.convert_to_tensor(self.step), self.reset_every_steps), 0)
            memory = ops.where(fresh, ops.zeros_like(memory), memory)
        return memory

    def write(self, new_memory):
        """Replaces this replica's memory with `new_memory` (gradient stopped)."""
        if tuple(new_memory.shape) != self.shape:
            raise ValueError(
                f"RecurrenceMemory: new memory has shape {tuple(new_memory.shape)}, the buffer "
                f"holds {self.shape} (per-replica batch, layers, memory_length, hidden).")
        if _on_tensorflow():
            import tensorflow as tf

            new_memory = tf.stop_gradient(tf.cast(new_memory, self.dtype))
            self.step.assign_add(1)
            return self.variable.assign(new_memory)
        new_memory = ops.stop_gradient(ops.cast(new_memory, self.dtype))
        self.step.assign_add(1)
        self.variable.assign(new_memory)
        return self.variable

    def reset(self, step=None):
        """Zeros every replica's memory (on TensorFlow, call outside `strategy.run`, e.g. from a callback).

        Args:
            step: when given, the global step the next `write()` belongs to.
        """
        if _on_tensorflow():
            import tensorflow as tf

            self.variable.assign(tf.zeros(self.shape, self.dtype))
            if step is not None:
                self.step.assign(tf.constant(int(step), tf.int32))
            return
        self.variable.assign(ops.zeros(self.shape, self.dtype))
        if step is not None:
            self.step.assign(int(step))

    def save(self, path):
        """Writes this process's per-replica memories and step counter to `path` (.npz), atomically."""
        values = self.local_values()
        step = int(ops.convert_to_numpy(self._local_step_variables()[0]))
        buffer = io.BytesIO()  # np.savez seeks, which GFile (gs://) writers cannot.
        np.savez(buffer, step=np.int64(step), shape=np.asarray(self.shape, np.int64),
                 **{f"replica_{i}": value for i, value in enumerate(values)})
        atomic_files.write_bytes(path, buffer.getvalue())

    def restore(self, path):
        """Loads what `save()` wrote; raises ValueError naming the mismatch when it cannot.

        Returns:
            The restored step counter.
        """
        with atomic_files.gfile(path).GFile(path, "rb") as f:
            stored = np.load(io.BytesIO(f.read()))
            components = self._local_variables()
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
                component.assign(ops.convert_to_tensor(stored[name], self.dtype))
            step = int(stored["step"])
        for component in self._local_step_variables():
            component.assign(ops.convert_to_tensor(step, "int32"))
        return step

    @staticmethod
    def remove(path):
        files = atomic_files.gfile(path)
        if files.exists(path):
            files.remove(path)

    def local_values(self):
        """This process's per-replica memories as numpy arrays, replica order."""
        return [np.asarray(ops.convert_to_numpy(v)) for v in self._local_variables()]

    def _local_variables(self):
        """This process's copies of the buffer: one per local replica on TensorFlow, else the variable."""
        if _on_tensorflow():
            return self.strategy.experimental_local_results(self.variable)
        return [self.variable]

    def _local_step_variables(self):
        """The step counter's copies, as `_local_variables`."""
        if _on_tensorflow():
            return self.strategy.experimental_local_results(self.step)
        return [self.step]


def _on_tensorflow():
    return keras.config.backend() == "tensorflow"
