"""``compare`` of an LLM: vLLM's OpenAI server beside vLLM inside Triton (TensorRT-LLM on a GPU host)."""
