"""The prompts of an LLM load test: synthetic ones of drawn token counts, or read from a file.

Synthetic prompts are words from a fixed list, each prompt opened by its own number so that
no two share a prefix (a server's prefix cache would otherwise serve them from memory),
trimmed with the model's tokenizer to the drawn count. A prompts file is JSON lines, one
prompt per line (``{"text": …}`` or ``{"prompt": …}``, or chat ``{"messages": [...]}``,
with an optional ``max_tokens``), or a ShareGPT JSON file (a list of ``{"conversations":
[{"from": "human", "value": …}, {"from": "gpt", "value": …}, …]}``: the first human turn is
the prompt; the reply after it, counted with the tokenizer, is the output length).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.errors import SourceError
from tritongen.loadtest.llm.spec import TokenCount
from tritongen.loadtest.llm.tokenizer import count_tokens

_SENTENCE = (
    "the quick brown fox jumps over a lazy dog while seven bright stars watch from far "
    "above every river runs toward an open sea and old stories travel along with it "
    "through green valleys under heavy clouds near quiet towns where people build bridges "
    "paint walls and plant trees for the years that follow"
)
WORDS = tuple(_SENTENCE.split())
"""What synthetic prompts are made of."""


@dataclass(frozen=True)
class Prompt:
    """One request's prompt: text (completions) or chat messages, and the output tokens asked."""

    text: str | None = None
    messages: list[dict[str, str]] | None = None
    input_tokens: int | None = None
    """Tokens of the prompt, counted with the tokenizer (None: no tokenizer to count them)."""
    max_tokens: int | None = None
    """Output tokens to ask for (None: the server's own limit)."""
    meta: dict[str, Any] = field(default_factory=dict)

    def as_text(self) -> str:
        """The prompt as one text (chat messages joined by lines)."""
        if self.text is not None:
            return self.text
        return "\n".join(m.get("content", "") for m in self.messages or [])


def synthetic_prompts(
    tokenizer: Any, count: int, input_tokens: TokenCount, output_tokens: TokenCount, seed: int = 0
) -> list[Prompt]:
    """``count`` prompts of drawn input lengths (tokens), each asking for a drawn output length."""
    rng = random.Random(seed)
    prompts = []
    for number in range(count):
        want = input_tokens.draw(rng)
        text = _text_of(tokenizer, want, number, rng)
        prompts.append(
            Prompt(text=text, input_tokens=count_tokens(tokenizer, text), max_tokens=output_tokens.draw(rng))
        )
    return prompts


def _text_of(tokenizer: Any, tokens: int, number: int, rng: random.Random) -> str:
    """A text of ``tokens`` tokens (as near as the tokenizer allows), opened by its own number."""
    words = [str(number)]
    text = words[0]
    while count_tokens(tokenizer, text) < tokens:
        words += [rng.choice(WORDS) for _ in range(max(1, (tokens - count_tokens(tokenizer, text)) // 2))]
        text = " ".join(words)
    ids = tokenizer.encode(text, add_special_tokens=False).ids[:tokens]
    return str(tokenizer.decode(ids))


def read_prompts(path: Path, tokenizer: Any | None = None) -> list[Prompt]:
    """The prompts of a JSON-lines or ShareGPT file, counted with ``tokenizer`` where given.

    Raises:
        SourceError: the file is missing, empty, not JSON, or holds no prompt.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SourceError(f"--prompts {path}: {e.strerror}", "give a JSONL or ShareGPT JSON file") from e
    stripped = text.lstrip()
    if stripped.startswith("["):
        prompts = list(_sharegpt(path, stripped, tokenizer))
    else:
        prompts = [_line_prompt(path, number, line, tokenizer) for number, line in _lines(text)]
    if not prompts:
        raise SourceError(f"--prompts {path} holds no prompt", "one JSON object per line, or a ShareGPT list")
    return prompts


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def _line_prompt(path: Path, number: int, line: str, tokenizer: Any | None) -> Prompt:
    """One JSON line: ``text``/``prompt`` or ``messages``, and an optional ``max_tokens``."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as e:
        raise SourceError(
            f"--prompts {path}:{number} is not JSON: {e.msg}", "one JSON object per line"
        ) from e
    if not isinstance(entry, dict):
        raise SourceError(f"--prompts {path}:{number} is not a JSON object", 'e.g. {"text": "Hello"}')
    max_tokens = entry.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise SourceError(
            f"--prompts {path}:{number}: max_tokens must be a positive whole number", "e.g. 128"
        )
    messages = entry.get("messages")
    if isinstance(messages, list) and all(isinstance(m, dict) and "content" in m for m in messages):
        prompt = Prompt(
            messages=[{"role": str(m.get("role", "user")), "content": str(m["content"])} for m in messages]
        )
    elif isinstance(entry.get("text", entry.get("prompt")), str):
        prompt = Prompt(text=entry.get("text", entry.get("prompt")))
    else:
        raise SourceError(
            f"--prompts {path}:{number} has neither text, prompt nor messages",
            'e.g. {"text": "Hello"} or {"messages": [{"role": "user", "content": "Hello"}]}',
        )
    counted = None if tokenizer is None else count_tokens(tokenizer, prompt.as_text())
    return Prompt(text=prompt.text, messages=prompt.messages, input_tokens=counted, max_tokens=max_tokens)


def _sharegpt(path: Path, text: str, tokenizer: Any | None) -> Iterator[Prompt]:
    """The first human turn of each conversation, its reply's length as the output asked."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as e:
        raise SourceError(
            f"--prompts {path} is not JSON: {e.msg} (line {e.lineno})", "give a ShareGPT list"
        ) from e
    for entry in entries:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        for index, turn in enumerate(turns):
            if isinstance(turn, dict) and turn.get("from") == "human" and isinstance(turn.get("value"), str):
                reply = turns[index + 1] if index + 1 < len(turns) else None
                answer = reply.get("value") if isinstance(reply, dict) else None
                counted = None if tokenizer is None else count_tokens(tokenizer, turn["value"])
                out = (
                    count_tokens(tokenizer, answer)
                    if tokenizer is not None and isinstance(answer, str)
                    else None
                )
                yield Prompt(text=turn["value"], input_tokens=counted, max_tokens=out or None)
                break
