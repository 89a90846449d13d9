"""AdamW for XLNet pretraining: global-norm clipping that is correct across replicas, one fused update.

Keras' optimizers clip each replica's *local* gradients before the cross-replica
sum, so `global_clipnorm` under MirroredStrategy/TPUStrategy clips the wrong
norm. Our train step sums gradients over replicas itself and hands the
optimizer gradients that are already global; `AllReducedAdamW` therefore skips
the second all-reduce, and clipping, accumulation and the update all see the
true global gradient.

Keras' AdamW update is about ten separate element-wise passes per variable
(clip, decay, two moments, square root, division, three assignments), each
writing a temporary as large as the variable. On CPU and GPU that memory
traffic made the update cost a quarter of an XLNet-Base step. With
`fused=True` (the default) each variable instead gets one XLA-compiled kernel
that reads the variable, both moments and the gradient once and writes the
three back. It computes the same arithmetic as Keras' AdamW: clip by the
global norm, then decoupled decay `w -= lr * wd * w`, then Adam with bias
correction. Under TPUStrategy the whole step is XLA-compiled anyway, so the
Keras update is kept there.
"""

import re

import keras
import tensorflow as tf

from xlnet_tf.training.warmup_decay_schedule import WarmupDecaySchedule

# Variables whose path matches get no weight decay: LayerNorm scales/offsets,
# all biases (including XLNet's r_w/r_r/r_s attention biases and the LM bias).
NO_DECAY_PATTERN = re.compile(r"(layer_?norm|layernorm|bias|/gamma$|/beta$)", re.IGNORECASE)


@tf.function(jit_compile=True, autograph=False)
def _fused_adamw_kernel(variable, momentum, velocity, gradient, gradient_scale, learning_rate,
                        weight_decay, local_step, beta_1, beta_2, one_minus_beta_1,
                        one_minus_beta_2, epsilon):
    """One AdamW step on one variable; all three states are resource handles.

    `1 - beta` comes in computed in float64 (as Keras does): 1 - float32(0.999) is
    off by 1e-5 relative.
    """
    dtype = gradient.dtype
    value = tf.raw_ops.ReadVariableOp(resource=variable, dtype=dtype)
    m = tf.raw_ops.ReadVariableOp(resource=momentum, dtype=dtype)
    v = tf.raw_ops.ReadVariableOp(resource=velocity, dtype=dtype)
    gradient = gradient * gradient_scale
    m = m + (gradient - m) * one_minus_beta_1
    v = v + (tf.square(gradient) - v) * one_minus_beta_2
    alpha = learning_rate * tf.sqrt(1.0 - tf.pow(beta_2, local_step)) / (1.0 - tf.pow(beta_1, local_step))
    value = value - value * (weight_decay * learning_rate)
    value = value - m * alpha / (tf.sqrt(v) + epsilon)
    tf.raw_ops.AssignVariableOp(resource=momentum, value=m)
    tf.raw_ops.AssignVariableOp(resource=velocity, value=v)
    tf.raw_ops.AssignVariableOp(resource=variable, value=value)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class AllReducedAdamW(keras.optimizers.AdamW):
    """AdamW that expects gradients already summed over replicas by the train step.

    Outside a distribution strategy it is plain AdamW (same results, see `fused`).

    Args:
        fused: update each variable with one XLA-compiled kernel (TensorFlow
            backend, not under TPUStrategy, no per-variable `clipnorm`/`clipvalue`,
            no amsgrad); otherwise Keras' own AdamW update.
        **kwargs: `keras.optimizers.AdamW` arguments.

    Example:
    >>> import keras
    >>> variable = keras.Variable([1.0, -2.0])
    >>> optimizer = AllReducedAdamW(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> optimizer.apply([keras.ops.convert_to_tensor([3.0, 4.0])], [variable])
    >>> [round(float(x), 3) for x in variable.numpy()]
    [0.9, -2.1]
    """

    expects_all_reduced_gradients = True

    def __init__(self, fused=True, **kwargs):
        super().__init__(**kwargs)
        self.fused = bool(fused)

    def get_config(self):
        return {**super().get_config(), "fused": self.fused}

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)

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
        grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense
        scale = tf.constant(1.0, tf.float32)
        if self.global_clipnorm and self.global_clipnorm > 0:
            norm = tf.linalg.global_norm([tf.cast(g, tf.float32) for g in grads])
            # As keras.optimizers' clip_by_global_norm: NaN/inf norms make the scale NaN.
            scale = (self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
                     + (norm - norm))
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_fused_update, self._distribution_strategy,
            list(zip(grads, variables)), learning_rate, scale)

    def _distributed_fused_update(self, distribution, grads_and_vars, learning_rate, scale):
        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, self._fused_update_step,
                                         args=(gradient, learning_rate, scale), group=False)

    def _fused_update_step(self, variable, gradient, learning_rate, scale):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        decay = self.weight_decay if self.weight_decay and self._use_weight_decay(variable) else 0.0
        # Inside Strategy.update, a mirrored optimizer slot's .handle is this device's copy.
        _fused_adamw_kernel(
            variable.handle, self._momentums[index].value.handle,
            self._velocities[index].value.handle, tf.cast(gradient, dtype), tf.cast(scale, dtype),
            tf.cast(learning_rate, dtype), tf.constant(decay, dtype),
            tf.cast(self.iterations + 1, dtype), tf.constant(self.beta_1, dtype),
            tf.constant(self.beta_2, dtype), tf.constant(1.0 - self.beta_1, dtype),
            tf.constant(1.0 - self.beta_2, dtype), tf.constant(self.epsilon, dtype))


def uses_weight_decay(variable) -> bool:
    """True when `variable` gets weight decay (not LayerNorm, not a bias)."""
    path = getattr(variable, "path", None) or variable.name
    return NO_DECAY_PATTERN.search(path) is None


def create_optimizer(model, *, learning_rate, warmup_steps, train_steps, end_learning_rate=0.0,
                     decay_power=1.0, weight_decay=0.01, epsilon=1e-6, beta_1=0.9, beta_2=0.999,
                     clip_norm=1.0, accumulation_steps=1, loss_scaling=False, fused=True):
    """Builds the pretraining optimizer for `model` (whose variables must exist).

    Args:
        model: the built model; its trainable variables decide the weight-decay split.
        learning_rate: peak learning rate.
        warmup_steps: linear warmup, in optimizer updates.
        train_steps: total optimizer updates (end of the decay).
        end_learning_rate: learning rate at `train_steps`.
        decay_power: 1.0 = linear decay, otherwise polynomial.
        weight_decay: decoupled weight decay (0 disables it).
        epsilon: Adam epsilon (1e-6 in XLNet).
        clip_norm: global gradient-norm clip (0 disables it).
        accumulation_steps: micro-batches whose gradients are averaged per update.
        loss_scaling: wrap in a dynamic `LossScaleOptimizer` (for mixed_float16).
        fused: one XLA-compiled update kernel per variable (see `AllReducedAdamW`).

    Returns:
        A Keras optimizer.
    """
    schedule = WarmupDecaySchedule(learning_rate, warmup_steps=warmup_steps,
                                   decay_steps=train_steps, end_learning_rate=end_learning_rate,
                                   power=decay_power, accumulation_steps=accumulation_steps)
    optimizer = AllReducedAdamW(
        learning_rate=schedule, weight_decay=float(weight_decay), beta_1=beta_1, beta_2=beta_2,
        epsilon=epsilon, global_clipnorm=clip_norm or None, fused=fused,
        gradient_accumulation_steps=accumulation_steps if accumulation_steps > 1 else None)
    if weight_decay:
        excluded = [v for v in model.trainable_variables if not uses_weight_decay(v)]
        optimizer.exclude_from_weight_decay(var_list=excluded)
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
