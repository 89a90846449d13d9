"""The JAX train step's dropout seed: the optimizer's micro-batch counter as the step's state holds it.

Seeded dropout (`xlnet_tf.layers.seeded_dropout`) folds the optimizer's
micro-batch counter into every mask's seed, so a resumed run draws the masks
the uninterrupted run drew. TensorFlow and PyTorch read the counter variable
itself inside the step. Keras' JAX trainer is stateless: the optimizer's
variables travel in the step's `state` and the variable objects keep the value
they had when the step was traced, so the counter is read from that state and
handed to the forward pass (`seeded_dropout.traced_step`).
"""

from xlnet_tf.layers import seeded_dropout


class TracedDropoutStep:
    """Mixin of a `keras.Model`: the JAX train step's forward pass draws its masks from the step in `state`.

    `compute_loss_and_updates` is the JAX trainer's stateless forward pass
    (inside `jax.value_and_grad`; the other backends never call it). It runs
    here under `seeded_dropout.traced_step(counter)`, the counter's value before
    this step's `apply` (as TensorFlow's forward pass reads it), so every step
    draws new masks and a restored optimizer counter redraws the same ones.

    Example:
    >>> class MyTask(TracedDropoutStep, keras.Model):  # doctest: +SKIP
    ...     def call(self, inputs, training=None):
    ...         seed = seeded_dropout.training_dropout_seed(self, training)  # the traced step's seed
    """

    def compute_loss_and_updates(self, trainable_variables, non_trainable_variables, metrics_variables, x, y,
                                 sample_weight, training=False, optimizer_variables=None):
        arguments = (trainable_variables, non_trainable_variables, metrics_variables, x, y, sample_weight)
        if not training or self.optimizer is None or optimizer_variables is None:
            return super().compute_loss_and_updates(*arguments, training=training,
                                                    optimizer_variables=optimizer_variables)
        step = seeded_dropout.micro_batch_counter_value(self.optimizer, optimizer_variables)
        with seeded_dropout.traced_step(step):
            return super().compute_loss_and_updates(*arguments, training=True,
                                                    optimizer_variables=optimizer_variables)
