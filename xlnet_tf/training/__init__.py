"""Pretraining machinery: strategies, optimizer and schedule, recurrence memory, run config, callbacks."""

from xlnet_tf.training.optimizer import AllReducedAdamW, create_optimizer, uses_weight_decay
from xlnet_tf.training.recurrence_memory import RecurrenceMemory
from xlnet_tf.training.strategy import (configure_virtual_cpu_devices, per_replica_batch_size,
                                        resolve_batch_sizes, resolve_strategy)
from xlnet_tf.training.warmup_decay_schedule import WarmupDecaySchedule
