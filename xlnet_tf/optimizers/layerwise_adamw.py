"""`LayerwiseAdamW`: AdamW whose learning rate is scaled per variable (layer-wise decay)."""

import keras

from xlnet_tf.optimizers.fused_adamw_muon import FusedAdamWMuon


@keras.saving.register_keras_serializable(package="xlnet_tf")
class LayerwiseAdamW(FusedAdamWMuon):
    """AdamW with a learning-rate multiplier per variable.

    Used for layer-wise learning-rate decay: block `i` of `N` trains at
    `layer_decay ** (N - 1 - i)` times the scheduled rate. The multiplier scales
    the *update*; the original XLNet code scaled gradients instead, which Adam's
    normalisation almost entirely cancels. Decoupled weight decay is not scaled.

    Args:
        learning_rate_multipliers: list of `(variables, multiplier)` pairs; variables not
            listed use 1.0. Variables must already exist (build the model first).
        multipliers_by_path: `{variable.path: multiplier}`, the same information by
            name; this is what `get_config` stores, so a `.keras` file restores the
            layer-wise decay with the model's variables.
        **kwargs: `FusedAdamWMuon` arguments (the update is fused unless `fused=False`).

    Example:
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig
    >>> from xlnet_tf.optimizers import LayerwiseAdamW
    >>> from xlnet_tf.optimizers.layerwise_adamw import layer_decay_multipliers
    >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=32, num_layers=2, num_heads=2,
    ...                                      head_dim=4, hidden_dim=8, intermediate_dim=16))
    >>> multipliers = layer_decay_multipliers(backbone, 0.75)  # the last block at 1.0
    >>> optimizer = LayerwiseAdamW(learning_rate_multipliers=multipliers, learning_rate=3e-5)
    >>> [optimizer.learning_rate_multiplier(block.trainable_variables[0]) for block in backbone.blocks]
    [0.75, 1.0]
    """

    def __init__(self, learning_rate_multipliers=(), multipliers_by_path=None, **kwargs):
        super().__init__(**kwargs)
        self._multipliers = {}
        self._multipliers_by_path = {str(k): float(v) for k, v in (multipliers_by_path or {}).items()}
        for variables, multiplier in learning_rate_multipliers:
            for variable in variables:
                self._multipliers[self._var_key(variable)] = float(multiplier)
                self._multipliers_by_path[variable.path] = float(multiplier)

    def get_config(self):
        config = super().get_config()
        config["multipliers_by_path"] = dict(self._multipliers_by_path)
        return config

    def update_step(self, gradient, variable, learning_rate):
        # Keras' unfused path; the fused one reads learning_rate_multiplier().
        multiplier = self.learning_rate_multiplier(variable)
        if multiplier != 1.0:
            learning_rate = learning_rate * multiplier
        return super().update_step(gradient, variable, learning_rate)

    def learning_rate_multiplier(self, variable):
        """The multiplier applied to `variable` (1.0 when not listed)."""
        key = self._var_key(variable)
        if key not in self._multipliers:
            # A restored optimizer knows its variables by path only.
            self._multipliers[key] = self._multipliers_by_path.get(getattr(variable, "path", None), 1.0)
        return self._multipliers[key]


def layer_decay_multipliers(backbone, layer_decay):
    """`(variables, multiplier)` pairs for the blocks of an `XLNetBackbone` (empty when decay is 1)."""
    if layer_decay == 1.0:
        return []
    count = len(backbone.blocks)
    return [(block.trainable_variables, layer_decay ** (count - 1 - i))
            for i, block in enumerate(backbone.blocks)]
