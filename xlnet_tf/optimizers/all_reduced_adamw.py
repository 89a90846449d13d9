"""AdamW for XLNet pretraining: global-norm clipping that is correct across replicas, one fused update.

Keras' optimizers clip each replica's *local* gradients before the cross-replica
sum, so `global_clipnorm` under MirroredStrategy/TPUStrategy clips the wrong
norm. Our train step sums gradients over replicas itself and hands the
optimizer gradients that are already global; `AllReducedAdamW` therefore skips
the second all-reduce, and clipping, accumulation and the update all see the
true global gradient. The update itself is `FusedAdamWMuon`'s (TensorFlow's in-place Adam kernel),
with `LayerwiseAdamW`'s per-variable learning-rate multipliers.

On JAX and PyTorch there is no replica context to sum over: under `keras.distribution`
the gradients a train step hands the optimizer are already global, so this is
`LayerwiseAdamW` there, with the same numbers as on TensorFlow.
"""

import keras

from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW


@keras.saving.register_keras_serializable(package="xlnet_tf")
class AllReducedAdamW(LayerwiseAdamW):
    """`LayerwiseAdamW` that expects gradients already summed over replicas by the train step.

    Outside a distribution strategy (and on JAX and PyTorch) it is plain AdamW (same results as Keras').

    Example:
    >>> import keras
    >>> from xlnet_tf.optimizers import AllReducedAdamW
    >>> variable = keras.Variable([1.0, -2.0])
    >>> optimizer = AllReducedAdamW(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> optimizer.apply([keras.ops.convert_to_tensor([3.0, 4.0])], [variable])
    >>> tuple(round(float(x), 3) for x in keras.ops.convert_to_numpy(variable))
    (0.9, -2.1)
    """

    expects_all_reduced_gradients = True

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # TensorFlow's optimizer sums over replicas here; the train step already has.
        return list(grads_and_vars)

