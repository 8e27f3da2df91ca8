"""Helpers shared by the test tiers: models written in code, corpora, process probes."""
