"""AdamW for XLNet pretraining: global-norm clipping that is correct across replicas, one fused update.

Keras' optimizers clip each replica's *local* gradients before the cross-replica
sum, so `global_clipnorm` under MirroredStrategy/TPUStrategy clips the wrong
norm. Our train step sums gradients over replicas itself and hands the
optimizer gradients that are already global; `AllReducedAdamW` therefore skips
the second all-reduce, and clipping, accumulation and the update all see the
true global gradient. The update itself is `FusedAdamW`'s (TensorFlow's in-place Adam kernel).
"""

import re

import keras

from xlnet_tf.optimizers.fused_adamw import FusedAdamW
from xlnet_tf.optimizers.warmup_decay_schedule import WarmupDecaySchedule

# Variables whose path matches get no weight decay: LayerNorm scales/offsets,
# all biases (including XLNet's r_w/r_r/r_s attention biases and the LM bias).
NO_DECAY_PATTERN = re.compile(r"(layer_?norm|layernorm|bias|/gamma$|/beta$)", re.IGNORECASE)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class AllReducedAdamW(FusedAdamW):
    """`FusedAdamW` that expects gradients already summed over replicas by the train step.

    Outside a distribution strategy it is plain AdamW (same results as Keras').

    Example:
    >>> import keras
    >>> variable = keras.Variable([1.0, -2.0])
    >>> optimizer = AllReducedAdamW(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> optimizer.apply([keras.ops.convert_to_tensor([3.0, 4.0])], [variable])
    >>> [round(float(x), 3) for x in variable.numpy()]
    [0.9, -2.1]
    """

    expects_all_reduced_gradients = True

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


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
        fused: update in place with TensorFlow's Adam kernel (see `FusedAdamW`).

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
