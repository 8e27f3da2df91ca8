"""``tritongen perf-analyzer``: perf_analyzer's command line, report and CSV over tritongen's load test."""
