"""Crash-safe storage of run directories: atomic file writes and the one-run-per-directory lock."""
