"""`build_optimizer`: the one AdamW recipe of `compile()`, `xlnet-tf finetune` and `xlnet-tf pretrain`.

The recipe is XLNet's: AdamW (epsilon 1e-6) on a linear warmup followed by a
linear (or polynomial) decay, a global gradient-norm clip, no weight decay on
LayerNorm parameters and biases, and, for fine-tuning, layer-wise
learning-rate decay over the backbone's blocks. `algorithm="muon"` gives the
blocks' weight matrices Muon's orthogonalised step instead of Adam's, under the
same schedule, clip and decay (the tiny pretraining config's choice). Its keyword arguments are the
keys of a run config's `optimizer` section, plus the `training` keys the
optimizer depends on (`xlnet_tf.training.run_sections.optimizer_arguments`
maps a config onto them), so `classifier.compile(**settings)` and
`xlnet-tf finetune` with the same values train alike.
"""

import inspect
import re

import keras

from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW
from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW, layer_decay_multipliers
from xlnet_tf.optimizers.warmup_decay_schedule import WarmupDecaySchedule
from xlnet_tf.training.run_sections import OPTIMIZER_ALGORITHMS

# Variables whose path matches get no weight decay: LayerNorm scales/offsets,
# all biases (including XLNet's r_w/r_r/r_s attention biases and the LM bias).
NO_DECAY_PATTERN = re.compile(r"(layer_?norm|layernorm|bias|/gamma$|/beta$)", re.IGNORECASE)


def muon_variables(model):
    """The variables `algorithm="muon"` gives Muon's step: the weight matrices of the backbone's blocks.

    The attention kernels (`[hidden, heads, head_dim]`, taken as `[hidden, heads * head_dim]`)
    and the feed-forward kernels. Embeddings, biases, LayerNorm parameters, the relative
    attention biases and the task heads keep AdamW, as Muon's authors advise.

    Raises:
        ValueError: when `model` has no XLNet backbone (`model.backbone.blocks`).
    """
    blocks = getattr(getattr(model, "backbone", None), "blocks", None)
    if not blocks:
        raise ValueError(f"algorithm 'muon' needs a model with an XLNet backbone (`model.backbone.blocks`); "
                         f"{type(model).__name__} has none.")
    return [v for block in blocks for v in block.trainable_variables
            if v.path.endswith("kernel") and len(v.shape) in (2, 3)]


def uses_weight_decay(variable) -> bool:
    """True when `variable` gets weight decay (not LayerNorm, not a bias).

    Example:
    >>> import keras
    >>> from xlnet_tf.optimizers import uses_weight_decay
    >>> dense = keras.layers.Dense(2)
    >>> dense.build((None, 3))
    >>> tuple(uses_weight_decay(v) for v in dense.weights)
    (True, False)
    """
    path = getattr(variable, "path", None) or variable.name
    return NO_DECAY_PATTERN.search(path) is None


def exclude_from_weight_decay(optimizer, model):
    """Exempts `model`'s LayerNorm parameters and biases from `optimizer`'s weight decay.

    Keras keeps the exclusions by variable, outside the optimizer's config, so a
    model restored from a `.keras` file calls this again (`XLNetTask.compile_from_config`).

    Args:
        optimizer: a Keras optimizer with `weight_decay` (a loss-scale wrapper is looked through).
        model: the built model whose trainable variables the optimizer updates.

    Example:
    >>> import keras
    >>> from xlnet_tf.optimizers import exclude_from_weight_decay
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> optimizer = keras.optimizers.AdamW(weight_decay=0.01)
    >>> exclude_from_weight_decay(optimizer, model)
    >>> tuple(optimizer._use_weight_decay(v) for v in model.trainable_variables)
    (True, False)
    """
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    if getattr(optimizer, "weight_decay", None):
        optimizer.exclude_from_weight_decay(
            var_list=[v for v in model.trainable_variables if not uses_weight_decay(v)])


def build_optimizer(model, *, learning_rate=2e-5, warmup_steps=100, train_steps=None, end_learning_rate=0.0,
                    decay_power=1.0, weight_decay=0.01, adam_epsilon=1e-6, beta_1=0.9, beta_2=0.999,
                    clip_norm=1.0, layer_decay=1.0, gradient_accumulation_steps=1, loss_scaling=False,
                    fused=True, algorithm="adamw"):
    """Builds the XLNet AdamW optimizer for `model` (whose variables must exist).

    The defaults are those of `xlnet-tf finetune`'s config
    (`xlnet_tf.finetuning.finetuning_config.FinetuneOptimizerSection`).

    A model whose train step sums gradients over replicas itself
    (`all_reduces_gradients`, as `XLNetPretrainer`) gets `AllReducedAdamW`, so
    the clip sees the true global norm; any other model gets `LayerwiseAdamW`
    under Keras' own train step. Both take the layer-wise multipliers.

    Args:
        model: the built model; its trainable variables decide the weight-decay
            split, and its `backbone.blocks` the layer-wise decay.
        learning_rate: peak learning rate, reached at the end of the warmup.
        warmup_steps: linear warmup from 0, in optimizer updates.
        train_steps: total optimizer updates, where the decay reaches
            `end_learning_rate`; None keeps `learning_rate` after the warmup
            (for `fit` runs of unknown length).
        end_learning_rate: learning rate at `train_steps`.
        decay_power: 1.0 = linear decay, otherwise polynomial.
        weight_decay: decoupled weight decay (0 disables it); never on LayerNorm
            parameters and biases (`uses_weight_decay`).
        adam_epsilon: Adam epsilon (1e-6 in XLNet).
        beta_1: Adam's first-moment decay rate.
        beta_2: Adam's second-moment decay rate.
        clip_norm: global gradient-norm clip (0 disables it).
        layer_decay: in (0, 1]; block `i` of `N` trains at
            `layer_decay ** (N - 1 - i)` times the rate (embeddings, relative
            biases and heads at the full rate). 1 disables it.
        gradient_accumulation_steps: micro-batches whose gradients are averaged per update.
        loss_scaling: wrap in a dynamic `LossScaleOptimizer` (for mixed_float16).
        fused: update in place with TensorFlow's Adam kernel (see `FusedAdamWMuon`); on JAX
            and PyTorch, the kernel's arithmetic in `keras.ops`, for the same numbers.
        algorithm: "adamw", or "muon": the blocks' weight matrices (`muon_variables`)
            take Muon's orthogonalised momentum step at the same learning rate
            (`xlnet_tf.optimizers.muon_update`), everything else AdamW.

    Returns:
        A Keras optimizer.

    Raises:
        ValueError: naming the argument that is out of range or does not fit the model.

    Example:
    >>> from xlnet_tf import XLNetBackbone, XLNetClassifier, XLNetConfig
    >>> from xlnet_tf.optimizers import build_optimizer
    >>> classifier = XLNetClassifier(XLNetBackbone(XLNetConfig(
    ...     vocabulary_size=32, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16)),
    ...     num_classes=2)
    >>> optimizer = build_optimizer(classifier, learning_rate=5e-5, train_steps=1000, layer_decay=0.75)
    >>> classifier.compile(optimizer=optimizer)  # the same as classifier.compile(learning_rate=5e-5, ...)
    >>> round(float(optimizer.learning_rate_multiplier(classifier.backbone.blocks[0].trainable_variables[0])), 2)
    0.75
    """
    if not 0 < layer_decay <= 1:
        raise ValueError(f"layer_decay must be in (0, 1], got {layer_decay}.")
    if algorithm not in OPTIMIZER_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {OPTIMIZER_ALGORITHMS}, got {algorithm!r}.")
    muon_paths = [v.path for v in muon_variables(model)] if algorithm == "muon" else []
    if train_steps is not None and warmup_steps > train_steps:
        raise ValueError(f"warmup_steps ({warmup_steps}) exceeds train_steps ({train_steps}).")
    multipliers = []
    if layer_decay != 1:
        blocks = getattr(getattr(model, "backbone", None), "blocks", None)
        if not blocks:
            raise ValueError(f"layer_decay ({layer_decay}) needs a model with an XLNet backbone "
                             f"(`model.backbone.blocks`); {type(model).__name__} has none.")
        multipliers = layer_decay_multipliers(model.backbone, layer_decay)
    if train_steps is None:
        # Decay from the peak to the peak: constant after the warmup.
        schedule = WarmupDecaySchedule(learning_rate, warmup_steps, max(warmup_steps, 1),
                                       end_learning_rate=learning_rate,
                                       accumulation_steps=gradient_accumulation_steps)
    else:
        schedule = WarmupDecaySchedule(learning_rate, warmup_steps=warmup_steps, decay_steps=train_steps,
                                       end_learning_rate=end_learning_rate, power=decay_power,
                                       accumulation_steps=gradient_accumulation_steps)
    optimizer_class = AllReducedAdamW if getattr(model, "all_reduces_gradients", False) else LayerwiseAdamW
    optimizer = optimizer_class(
        learning_rate_multipliers=multipliers, learning_rate=schedule, weight_decay=float(weight_decay),
        beta_1=beta_1, beta_2=beta_2, epsilon=adam_epsilon, global_clipnorm=clip_norm or None, fused=fused,
        muon_variable_paths=muon_paths,
        gradient_accumulation_steps=gradient_accumulation_steps if gradient_accumulation_steps > 1 else None)
    exclude_from_weight_decay(optimizer, model)
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


# The settings `build_optimizer` takes besides the model: what `XLNetTask.compile` passes on to it.
BUILD_OPTIMIZER_ARGUMENTS = tuple(name for name in inspect.signature(build_optimizer).parameters
                                  if name != "model")
