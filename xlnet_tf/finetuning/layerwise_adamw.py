"""`LayerwiseAdamW`: AdamW whose learning rate is scaled per variable (layer-wise decay)."""

from xlnet_tf.training.fused_adamw import FusedAdamW


class LayerwiseAdamW(FusedAdamW):
    """AdamW with a learning-rate multiplier per variable.

    Used for layer-wise learning-rate decay: block `i` of `N` trains at
    `layer_decay ** (N - 1 - i)` times the scheduled rate. The multiplier scales
    the *update*; the original XLNet code scaled gradients instead, which Adam's
    normalisation almost entirely cancels. Decoupled weight decay is not scaled.

    Args:
        learning_rate_multipliers: list of `(variables, multiplier)` pairs; variables not
            listed use 1.0. Variables must already exist (build the model first).
        **kwargs: `FusedAdamW` arguments (the update is fused unless `fused=False`).

    Example:
    >>> multipliers = layer_decay_multipliers(model.backbone, 0.75)
    >>> optimizer = LayerwiseAdamW(learning_rate_multipliers=multipliers, learning_rate=3e-5)
    """

    def __init__(self, learning_rate_multipliers=(), **kwargs):
        super().__init__(**kwargs)
        self._multipliers = {}
        for variables, multiplier in learning_rate_multipliers:
            for variable in variables:
                self._multipliers[self._var_key(variable)] = float(multiplier)

    def update_step(self, gradient, variable, learning_rate):
        # Keras' unfused path; the fused one reads learning_rate_multiplier().
        multiplier = self._multipliers.get(self._var_key(variable), 1.0)
        if multiplier != 1.0:
            learning_rate = learning_rate * multiplier
        return super().update_step(gradient, variable, learning_rate)

    def learning_rate_multiplier(self, variable):
        """The multiplier applied to `variable` (1.0 when not listed)."""
        return self._multipliers.get(self._var_key(variable), 1.0)


def layer_decay_multipliers(backbone, layer_decay):
    """`(variables, multiplier)` pairs for the blocks of an `XLNetBackbone` (empty when decay is 1)."""
    if layer_decay == 1.0:
        return []
    count = len(backbone.blocks)
    return [(block.trainable_variables, layer_decay ** (count - 1 - i))
            for i, block in enumerate(backbone.blocks)]
