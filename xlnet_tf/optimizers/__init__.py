"""Optimizers and schedules: fused AdamW (or Muon on weight matrices), replica-aware AdamW, layer-wise decay, warmup.

`build_optimizer` is the one recipe every training path uses.
"""

from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW
from xlnet_tf.optimizers.build_optimizer import build_optimizer, exclude_from_weight_decay, uses_weight_decay
from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW
from xlnet_tf.optimizers.warmup_decay_schedule import WarmupDecaySchedule

__all__ = ["AllReducedAdamW", "LayerwiseAdamW", "WarmupDecaySchedule", "build_optimizer",
           "exclude_from_weight_decay", "uses_weight_decay"]
