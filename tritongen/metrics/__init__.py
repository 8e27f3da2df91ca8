"""Server-side figures: Prometheus metrics sampled during a run, and the statistics API."""
