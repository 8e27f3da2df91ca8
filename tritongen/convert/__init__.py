"""Converters: one module per target format, each writing an artifact and what its config needs."""
