"""Pretraining runs: the run config, `run_pretraining` over the training engine, and the learning report."""
