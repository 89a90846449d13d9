"""`FusedAdamWMuon`: Keras' AdamW arithmetic with TensorFlow's in-place Adam kernel, and Muon on chosen matrices.

Keras' AdamW update is about ten separate element-wise passes per variable
(clip, decay, two moments, square root, division, three assignments), each
writing a temporary as large as the variable, and Keras clips by scaling every
gradient at once, which holds a second copy of all gradients. On TensorFlow each
variable gets the native `ResourceApplyAdam` kernel, which updates the
variable and both moments in place in one pass (CPU and GPU, and it also has an
XLA lowering), after an in-place decoupled decay. The updates run one variable
after another, so at most one variable-sized temporary (the scaled gradient)
is alive at a time. Under TPUStrategy the whole step is XLA-compiled anyway, so
Keras' own update is kept there.

On JAX and PyTorch the same arithmetic is written in `keras.ops`
(`adam_kernel_step`: the kernel's order of operations and its float32 `1 - beta`),
so the three backends give the same numbers; the optimizer's state is Keras'
AdamW's (`build`), which the JAX trainer carries through `stateless_apply`.

Variables named in `muon_variable_paths` (the blocks' weight matrices, when
`build_optimizer(algorithm="muon")`) get Muon's orthogonalised momentum step
(`xlnet_tf.optimizers.muon_update`) instead of Adam's, with the same clip,
decoupled decay and learning rate; every other variable keeps AdamW.
"""

import keras
from keras import ops

from xlnet_tf.optimizers.muon_update import muon_update


def apply_adamw_in_place(variable, momentum, velocity, gradient, *, learning_rate, decay_rate,
                         beta_1, beta_2, epsilon, local_step, gradient_scale=None):
    """One AdamW step on one variable through TensorFlow's in-place Adam kernel (TensorFlow only).

    Keras' order: decay `w *= 1 - decay_rate` (Keras writes `w -= w * decay_rate`, the
    same to rounding), then the bias-corrected Adam step
    `w -= m * lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) / (sqrt(v) + epsilon)`.
    The kernel forms `1 - beta` from the float32 beta (Keras from the Python
    float), a difference of about 1e-5 relative in the moment updates.

    Args:
        variable, momentum, velocity: resource handles of the variable and its moments.
        gradient: the gradient, in the variable's dtype.
        learning_rate: scheduled rate times any per-variable multiplier (a scalar tensor).
        decay_rate: learning rate times weight decay (a scalar tensor), or None for no decay.
        beta_1, beta_2, epsilon: Python floats.
        local_step: the 1-based step number (a scalar tensor of the variable's dtype).
        gradient_scale: the clipping factor (a scalar tensor), or None.

    Returns:
        The kernel's op, to order the next update after this one.
    """
    import tensorflow as tf

    dtype = gradient.dtype
    if gradient_scale is not None:
        gradient = gradient * gradient_scale
    decay = []
    if decay_rate is not None:
        value = tf.raw_ops.ReadVariableOp(resource=variable, dtype=dtype)
        # `w * (1 - rate)` assigned, not `w * rate` subtracted: the assignment adopts the
        # product's buffer (its only user), so the weights are read once and written once.
        decay = [tf.raw_ops.AssignVariableOp(resource=variable, value=value * (1.0 - decay_rate))]
    with tf.control_dependencies(decay):
        return tf.raw_ops.ResourceApplyAdam(
            var=variable, m=momentum, v=velocity,
            beta1_power=tf.pow(tf.constant(beta_1, dtype), local_step),
            beta2_power=tf.pow(tf.constant(beta_2, dtype), local_step),
            lr=learning_rate, beta1=tf.constant(beta_1, dtype), beta2=tf.constant(beta_2, dtype),
            epsilon=tf.constant(epsilon, dtype), grad=gradient, use_locking=False)


def adam_kernel_step(value, momentum, velocity, gradient, *, learning_rate, beta_1, beta_2, epsilon,
                     local_step):
    """`ResourceApplyAdam`'s arithmetic in `keras.ops`: the new `(value, momentum, velocity)`.

    The kernel's order of operations, with `1 - beta` formed from the beta in the
    gradient's dtype (as the kernel does, where Keras' Adam takes it from the Python
    float), so that every backend gives TensorFlow's fused numbers.

    Args:
        value, momentum, velocity: the variable's value and its moments (tensors).
        gradient: the gradient, in the variable's dtype.
        learning_rate: scheduled rate times any per-variable multiplier (a scalar tensor).
        beta_1, beta_2, epsilon: Python floats.
        local_step: the 1-based step number (a scalar tensor of the variable's dtype).

    Returns:
        `(value, momentum, velocity)` after the step, each of `value`'s shape.

    Example:
    >>> one = keras.ops.ones((2,))
    >>> value, _, _ = adam_kernel_step(one, one * 0, one * 0, keras.ops.convert_to_tensor([3.0, -4.0]),
    ...                                learning_rate=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-6, local_step=1.0)
    >>> [round(float(x), 3) for x in value]  # Adam's first step: the learning rate times the sign
    [0.9, 1.1]
    """
    dtype = gradient.dtype
    beta_1, beta_2 = ops.cast(beta_1, dtype), ops.cast(beta_2, dtype)
    alpha = (learning_rate * ops.sqrt(1 - ops.power(beta_2, local_step))
             / (1 - ops.power(beta_1, local_step)))
    momentum = momentum + (gradient - momentum) * (1 - beta_1)
    velocity = velocity + (ops.square(gradient) - velocity) * (1 - beta_2)
    value = value - (momentum * alpha) / (ops.sqrt(velocity) + ops.cast(epsilon, dtype))
    return value, momentum, velocity


@keras.saving.register_keras_serializable(package="xlnet_tf")
class FusedAdamWMuon(keras.optimizers.AdamW):
    """AdamW whose update of each variable is one in-place kernel (results equal Keras' AdamW), or Muon's step.

    The order is Keras': gradients are summed over replicas (unless a subclass
    says they already are), clipped by their global norm, then the variable
    gets decoupled decay `w -= lr * wd * w` and the bias-corrected Adam step.
    Clipping uses the norm of the summed gradient, i.e. the true global norm
    (Keras' own clips each replica's local gradients before the sum).

    Subclasses may scale a variable's Adam step with `learning_rate_multiplier`.

    Args:
        fused: use the in-place kernel (TensorFlow backend, not under TPUStrategy,
            no per-variable `clipnorm`/`clipvalue`, no amsgrad); on JAX and PyTorch
            the kernel's arithmetic in `keras.ops` (`adam_kernel_step`), under the
            same conditions. Otherwise Keras' own update.
        muon_variable_paths: paths of the variables (2-D, or 3-D attention kernels)
            that take Muon's step instead of Adam's; their Adam velocity stays unused.
        muon_momentum: Muon's momentum coefficient.
        **kwargs: `keras.optimizers.AdamW` arguments.

    Example:
    >>> variable = keras.Variable([1.0, -2.0])
    >>> optimizer = FusedAdamWMuon(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> optimizer.apply([keras.ops.convert_to_tensor([3.0, 4.0])], [variable])
    >>> [round(float(x), 3) for x in keras.ops.convert_to_numpy(variable)]
    [0.9, -2.1]
    """

    def __init__(self, fused=True, muon_variable_paths=(), muon_momentum=0.95, **kwargs):
        super().__init__(**kwargs)
        self.fused = bool(fused)
        self.muon_variable_paths = tuple(sorted(str(p) for p in muon_variable_paths))
        self.muon_momentum = float(muon_momentum)
        self._muon_paths = frozenset(self.muon_variable_paths)

    def get_config(self):
        return {**super().get_config(), "fused": self.fused,
                "muon_variable_paths": list(self.muon_variable_paths), "muon_momentum": self.muon_momentum}

    def build(self, var_list):
        super().build(var_list)
        # By index: the fused path sees the backend's variables, which carry no Keras path.
        paths = {self._get_variable_index(v): getattr(v, "path", None) for v in var_list}
        self._muon_indices = frozenset(i for i, path in paths.items() if path in self._muon_paths)
        unknown = self._muon_paths - set(paths.values())
        if unknown:
            raise ValueError(f"muon_variable_paths names variables this optimizer does not update: "
                             f"{sorted(unknown)}.")

    def update_step(self, gradient, variable, learning_rate):
        # Keras' unfused path and the kernel's arithmetic off TensorFlow: the clip and
        # the decay have already been applied.
        index = self._get_variable_index(variable)
        if index in self._muon_indices:
            momentum = self._momentums[index]
            new_momentum, update = muon_update(ops.cast(gradient, variable.dtype), momentum.value,
                                               self.muon_momentum)
            self.assign(momentum, new_momentum)
            self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * update)
            return
        if not self._uses_kernel_arithmetic():
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        momentum, velocity = self._momentums[index], self._velocities[index]
        value, new_momentum, new_velocity = adam_kernel_step(
            variable.value, momentum.value, velocity.value, ops.cast(gradient, dtype),
            learning_rate=ops.cast(learning_rate, dtype), beta_1=self.beta_1, beta_2=self.beta_2,
            epsilon=self.epsilon, local_step=ops.cast(self.iterations + 1, dtype))
        self.assign(momentum, new_momentum)
        self.assign(velocity, new_velocity)
        self.assign(variable, value)

    def learning_rate_multiplier(self, variable):
        """Factor on `variable`'s Adam step (not on its weight decay); 1.0 here."""
        return 1.0

    def _fused_settings(self):
        return self.fused and not self.amsgrad and not self.clipnorm and not self.clipvalue

    def _uses_fused_update(self):
        if not self._fused_settings() or keras.config.backend() != "tensorflow":
            return False
        import tensorflow as tf

        return not isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)

    def _uses_kernel_arithmetic(self):
        # Off TensorFlow the fused setting takes the kernel's arithmetic in keras.ops.
        return self._fused_settings() and keras.config.backend() != "tensorflow"

    # Keras calls _clip_gradients, then _apply_weight_decay, then _backend_update_step
    # (also on the update step of gradient accumulation); apply_adamw_in_place does all three.
    def _clip_gradients(self, grads):
        if self._uses_fused_update():
            return grads
        return super()._clip_gradients(grads)

    def _apply_weight_decay(self, variables):
        if self._uses_fused_update():
            return
        if not self._uses_kernel_arithmetic():
            return super()._apply_weight_decay(variables)
        if not self.weight_decay:
            return
        for variable in variables:
            if self._use_weight_decay(variable):
                dtype = variable.dtype
                rate = ops.cast(self.learning_rate, dtype) * ops.cast(self.weight_decay, dtype)
                # The fused path's form: `w * (1 - lr * wd)`.
                self.assign(variable, variable.value * (1.0 - rate))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self._uses_fused_update():
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import tensorflow as tf

        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        # Dense before the all-reduce: replicas' IndexedSlices can differ in length.
        grads_and_vars = self._all_reduce_sum_gradients(
            [(tf.convert_to_tensor(g), v) for g, v in zip(grads, variables)])
        scale = None
        if self.global_clipnorm and self.global_clipnorm > 0:
            norm = tf.linalg.global_norm([tf.cast(g, tf.float32) for g, _ in grads_and_vars])
            # As keras.optimizers' clip_by_global_norm: a NaN/inf norm makes the scale NaN.
            scale = (self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
                     + (norm - norm))
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_fused_update, self._distribution_strategy,
            list(grads_and_vars), learning_rate, scale)

    def _distributed_fused_update(self, distribution, grads_and_vars, learning_rate, scale):
        import tensorflow as tf

        previous = []
        for gradient, variable in grads_and_vars:
            # One variable after another: otherwise the executor may scale every gradient
            # before the first update, holding a second copy of all of them.
            with tf.control_dependencies(previous):
                updates = distribution.extended.update(
                    variable, self._fused_update_step, args=(gradient, learning_rate, scale),
                    group=False)
            previous = [u for u in tf.nest.flatten(updates) if u is not None]

    def _fused_update_step(self, variable, gradient, learning_rate, scale):
        import tensorflow as tf

        index = self._get_variable_index(variable)
        dtype = variable.dtype
        learning_rate = tf.cast(learning_rate, dtype)
        decay = self.weight_decay if self.weight_decay and self._use_weight_decay(variable) else 0.0
        if index in self._muon_indices:
            return self._fused_muon_step(index, variable, gradient, learning_rate, decay, scale)
        # Inside Strategy.update, a mirrored optimizer slot's .handle is this device's copy.
        return apply_adamw_in_place(
            variable.handle, self._momentums[index].value.handle,
            self._velocities[index].value.handle, tf.cast(gradient, dtype),
            learning_rate=learning_rate * self.learning_rate_multiplier(variable),
            decay_rate=learning_rate * decay if decay else None,
            beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
            local_step=tf.cast(self.iterations + 1, dtype),
            gradient_scale=None if scale is None else tf.cast(scale, dtype))

    def _fused_muon_step(self, index, variable, gradient, learning_rate, decay, scale):
        import tensorflow as tf

        dtype = variable.dtype
        gradient = tf.cast(gradient, dtype)
        if scale is not None:
            gradient = gradient * tf.cast(scale, dtype)
        # Handles, as in the AdamW path: inside Strategy.update they are this device's copies.
        momentum = self._momentums[index].value.handle
        new_momentum, update = muon_update(
            gradient, tf.raw_ops.ReadVariableOp(resource=momentum, dtype=dtype), self.muon_momentum)
        value = tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=dtype)
        if decay:  # Keras' order, as in the AdamW path: decoupled decay, then the step
            value = value * (1.0 - learning_rate * decay)
        step = learning_rate * self.learning_rate_multiplier(variable)
        return tf.group(tf.raw_ops.AssignVariableOp(resource=momentum, value=new_momentum),
                        tf.raw_ops.AssignVariableOp(resource=variable.handle, value=value - step * update))
