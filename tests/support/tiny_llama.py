"""A tiny random-weight Llama with a byte-level BPE tokenizer trained in code (nothing downloaded).

The model (hidden 128, 2 layers, 4 heads) says nothing sensible, but a real server (vLLM)
loads, batches and streams it as it would any Llama; with ``ignore_eos`` and ``min_tokens`` it
answers with exactly the tokens asked. ``chat_template=False`` leaves the tokenizer without a
chat template: a completions-only model.
"""

from __future__ import annotations

from pathlib import Path

from support.llm_tokenizer import write_tokenizer

CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}: {{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)
"""Each message between ``<s>`` and ``</s>`` after its role, then the assistant's turn opened."""


def write_tiny_llama(directory: Path, chat_template: bool = True, seed: int = 0) -> Path:
    """A Hugging Face model directory (config, safetensors weights, tokenizer files); the directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    write_tokenizer(directory)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json"), bos_token="<s>", eos_token="</s>"
    )
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    return directory
