"""Load kinds: what a load test's requests are, one module each, found by name (``registry``)."""
