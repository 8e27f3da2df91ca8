"""Recorded traffic read for replay: tritongen's JSON lines, Mooncake's LLM traces, Triton's trace files."""
