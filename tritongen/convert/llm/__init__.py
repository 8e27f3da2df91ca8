"""Triton model directories for language-model engines: vLLM (local and container) and TensorRT-LLM.

``settings`` holds the engine settings (derived from the model's config, checked as the
engines check them), ``environment`` finds the vLLM environment the embedded server runs
the local model in, ``vllm`` and ``tensorrtllm`` write the model directories, and ``formats``
says which format builds for which target.
"""
