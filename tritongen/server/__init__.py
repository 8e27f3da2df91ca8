"""Start and stop Triton servers: the bundled binary on this machine (CPU)."""
