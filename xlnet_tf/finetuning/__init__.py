"""Fine-tuning runs: config, layer-wise-decay optimizer, training loop with resume, evaluation."""
