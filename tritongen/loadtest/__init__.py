"""Load tests: Locust subprocesses driven and measured from here (Locust is never imported)."""
