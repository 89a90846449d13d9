"""The training engine shared by pretraining and fine-tuning: strategy, batch arithmetic, callbacks, run directory.

Nothing is imported here, so the light modules (`run_sections`, the strategy names) load
without TensorFlow: the CLI's `--help` and config checks stay fast.
"""
