"""Locust files (shipped in the wheel as ``tritongen.loadtests``)."""
