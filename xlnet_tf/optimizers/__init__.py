"""Optimizers and learning-rate schedules: fused AdamW, the replica-aware AdamW, layer-wise decay, warmup."""

from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW, create_optimizer, uses_weight_decay
from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW
from xlnet_tf.optimizers.warmup_decay_schedule import WarmupDecaySchedule
