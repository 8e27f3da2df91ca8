"""Shared basics: atomic file writes, result files, data readers."""
