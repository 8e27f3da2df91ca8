"""Language-model load tests: token-count distributions, latency limits, tokenizers and prompts."""
