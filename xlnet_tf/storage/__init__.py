"""Crash-safe storage: atomic file writes, preset directories, the one-run-per-directory lock."""
