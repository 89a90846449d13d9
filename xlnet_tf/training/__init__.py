"""The training engine shared by pretraining and fine-tuning: strategy, batch arithmetic, callbacks, run directory."""

from xlnet_tf.training.strategy import (configure_virtual_cpu_devices, per_replica_batch_size,
                                        resolve_batch_sizes, resolve_strategy)
