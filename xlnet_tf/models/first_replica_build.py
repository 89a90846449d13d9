"""Building a model under a multi-replica TensorFlow strategy from the first replica's batch.

Before its first step under a `tf.distribute` strategy, Keras' TensorFlow trainer
builds the model, the loss and the metrics from one batch of the data. It makes
that batch by averaging the replicas' batches (a `MEAN` reduce), which turns
integer token ids into float64 numbers: the model's id check then refuses them,
and a model that took them would embed averaged ids. With one replica there is
nothing to average, so the fault shows only on two or more GPUs or TPU cores.
The first replica's batch has the data's own dtypes and shapes, which is all the
build reads.
"""


class FirstReplicaBuild:
    """Mixin of a `keras.Model`: under a multi-replica strategy Keras builds it from the first replica's batch.

    Only Keras' TensorFlow trainer calls `_maybe_symbolic_build`; on JAX and
    PyTorch the mixin does nothing.

    Example:
    >>> class MyTask(FirstReplicaBuild, keras.Model):  # doctest: +SKIP
    ...     pass
    >>> with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():  # doctest: +SKIP
    ...     model = MyTask()
    >>> model.fit({"token_ids": ids, ...}, labels)  # doctest: +SKIP
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None and getattr(self, "_distribute_strategy", None) is not None:
            # import time: only Keras' TensorFlow trainer calls this method
            import tensorflow as tf

            strategy = self.distribute_strategy
            for _, _, data in iterator:  # as Keras reads it: the first batch of the epoch
                batch = next(data)
                break
            else:
                batch = None
            if batch is not None:
                data_batch = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0]
                    if isinstance(value, tf.distribute.DistributedValues) else value, batch)
                iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
