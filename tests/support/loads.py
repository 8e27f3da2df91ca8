"""Load settings shared by tests of what a command does rather than of what it measures."""

from __future__ import annotations

QUICK_RUNS = ["--duration", "0.5s", "--warmup", "0.5s", "--window", "0.25s", "--max-duration", "0.5s"]
"""The shortest runs that still go through every step: a partial first window, two windows of
warm-up, two measured ones (no wait for stability). For tests of a tune's or a load test's
mechanics (trials, resumes, interruptions, reports); a test that decides between configs by
their figures measures longer."""
