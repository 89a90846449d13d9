"""`FusedAdamW`: Keras' AdamW arithmetic in one XLA-compiled kernel per variable.

Keras' AdamW update is about ten separate element-wise passes per variable
(clip, decay, two moments, square root, division, three assignments), each
writing a temporary as large as the variable. On CPU and GPU that memory
traffic made the update a quarter of an XLNet-Base training step. Here each
variable gets one XLA kernel that reads the variable, both moments and the
gradient once and writes the three back. Under TPUStrategy the whole step is
XLA-compiled anyway, so Keras' own update is kept there.
"""

import keras
import tensorflow as tf


@tf.function(jit_compile=True, autograph=False)
def _fused_adamw_kernel(variable, momentum, velocity, gradient, gradient_scale, learning_rate,
                        decay_rate, local_step, beta_1, beta_2, one_minus_beta_1,
                        one_minus_beta_2, epsilon):
    """One AdamW step on one variable; the three states are resource handles.

    `1 - beta` comes in computed in float64, as Keras does: 1 - float32(0.999)
    is off by 1e-5 relative.
    """
    dtype = gradient.dtype
    value = tf.raw_ops.ReadVariableOp(resource=variable, dtype=dtype)
    m = tf.raw_ops.ReadVariableOp(resource=momentum, dtype=dtype)
    v = tf.raw_ops.ReadVariableOp(resource=velocity, dtype=dtype)
    gradient = gradient * gradient_scale
    m = m + (gradient - m) * one_minus_beta_1
    v = v + (tf.square(gradient) - v) * one_minus_beta_2
    alpha = learning_rate * tf.sqrt(1.0 - tf.pow(beta_2, local_step)) / (1.0 - tf.pow(beta_1, local_step))
    value = value - value * decay_rate
    value = value - m * alpha / (tf.sqrt(v) + epsilon)
    tf.raw_ops.AssignVariableOp(resource=momentum, value=m)
    tf.raw_ops.AssignVariableOp(resource=velocity, value=v)
    tf.raw_ops.AssignVariableOp(resource=variable, value=value)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class FusedAdamW(keras.optimizers.AdamW):
    """AdamW whose update of each variable is one fused kernel; results equal Keras' AdamW.

    The order is Keras': gradients are summed over replicas (unless a subclass
    says they already are), clipped by their global norm, then the variable
    gets decoupled decay `w -= lr * wd * w` and the bias-corrected Adam step.
    Clipping uses the norm of the summed gradient, i.e. the true global norm
    (Keras' own clips each replica's local gradients before the sum).

    Subclasses may scale a variable's Adam step with `learning_rate_multiplier`.

    Args:
        fused: use the fused kernel (TensorFlow backend, not under TPUStrategy,
            no per-variable `clipnorm`/`clipvalue`, no amsgrad); otherwise Keras'
            own update.
        **kwargs: `keras.optimizers.AdamW` arguments.

    Example:
    >>> variable = keras.Variable([1.0, -2.0])
    >>> optimizer = FusedAdamW(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> optimizer.apply([keras.ops.convert_to_tensor([3.0, 4.0])], [variable])
    >>> [round(float(x), 3) for x in variable.numpy()]
    [0.9, -2.1]
    """

    def __init__(self, fused=True, **kwargs):
        super().__init__(**kwargs)
        self.fused = bool(fused)

    def get_config(self):
        return {**super().get_config(), "fused": self.fused}

    def learning_rate_multiplier(self, variable):
        """Factor on `variable`'s Adam step (not on its weight decay); 1.0 here."""
        return 1.0

    def _uses_fused_update(self):
        return (self.fused and keras.backend.backend() == "tensorflow" and not self.amsgrad
                and not self.clipnorm and not self.clipvalue
                and not isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy))

    # Keras calls _clip_gradients, then _apply_weight_decay, then _backend_update_step
    # (also on the update step of gradient accumulation); the fused kernel does all three.
    def _clip_gradients(self, grads):
        if self._uses_fused_update():
            return grads
        return super()._clip_gradients(grads)

    def _apply_weight_decay(self, variables):
        if self._uses_fused_update():
            return
        super()._apply_weight_decay(variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self._uses_fused_update():
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        # Dense before the all-reduce: replicas' IndexedSlices can differ in length.
        grads_and_vars = self._all_reduce_sum_gradients(
            [(tf.convert_to_tensor(g), v) for g, v in zip(grads, variables)])
        scale = tf.constant(1.0, tf.float32)
        if self.global_clipnorm and self.global_clipnorm > 0:
            norm = tf.linalg.global_norm([tf.cast(g, tf.float32) for g, _ in grads_and_vars])
            # As keras.optimizers' clip_by_global_norm: a NaN/inf norm makes the scale NaN.
            scale = (self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
                     + (norm - norm))
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_fused_update, self._distribution_strategy,
            list(grads_and_vars), learning_rate, scale)

    def _distributed_fused_update(self, distribution, grads_and_vars, learning_rate, scale):
        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, self._fused_update_step,
                                         args=(gradient, learning_rate, scale), group=False)

    def _fused_update_step(self, variable, gradient, learning_rate, scale):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        learning_rate = tf.cast(learning_rate, dtype)
        decay = self.weight_decay if self.weight_decay and self._use_weight_decay(variable) else 0.0
        # Inside Strategy.update, a mirrored optimizer slot's .handle is this device's copy.
        _fused_adamw_kernel(
            variable.handle, self._momentums[index].value.handle,
            self._velocities[index].value.handle, tf.cast(gradient, dtype), tf.cast(scale, dtype),
            learning_rate * self.learning_rate_multiplier(variable), learning_rate * decay,
            tf.cast(self.iterations + 1, dtype), tf.constant(self.beta_1, dtype),
            tf.constant(self.beta_2, dtype), tf.constant(1.0 - self.beta_1, dtype),
            tf.constant(1.0 - self.beta_2, dtype), tf.constant(self.epsilon, dtype))
