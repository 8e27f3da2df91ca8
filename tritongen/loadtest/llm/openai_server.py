"""The checks before an OpenAI-compatible load test, and the requests it sends.

Before any load: the key (``--api-key-env``) is read, ``GET /v1/models`` must answer with a
model list that holds the model, the prompts are prepared (a ``--tokenizer`` that is not
there is refused), and the longest request (most prompt plus output tokens) is sent once,
cut to one output token, so that the server counts its prompt as it will during the test,
the chat template's tokens included: that count plus the output asked must fit the model's
``max_model_len``. A chat request to a model without a chat template (vLLM answers HTTP
400) is refused there too. Each check fails in one line.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.client.address import ServerAddress
from tritongen.client.openai_api import ServedModel, check_served, probe_request, served_models
from tritongen.errors import WorkloadInputError
from tritongen.io.loadgen_shared import OPENAI_PATHS
from tritongen.loadtest.llm.load import LlmLoad, PreparedLlm, prepare_llm_requests
from tritongen.loadtest.llm.prompts import Prompt


def prepare_openai_requests(
    load: LlmLoad,
    model: str,
    address: ServerAddress,
    path: Path,
    api_key: str | None,
    seed: int = 0,
    replayed: list[Prompt] | None = None,
) -> PreparedLlm:
    """Check the server at ``address`` takes the test's requests, and write them to ``path``.

    Raises:
        ServerError: the server cannot be reached, is not OpenAI-compatible or refuses the key.
        ConfigError: the model is not served, the tokenizer cannot be read, the longest request
            exceeds ``max_model_len``, or a chat request finds no chat template.
        SourceError: the prompts file cannot be read.
    """
    models = served_models(address, api_key)
    check_served(models, model)
    prepared = prepare_llm_requests(load, model, path, seed, replayed)
    probe = probe_request(address, OPENAI_PATHS[load.api], prepared.longest, api_key)
    if probe.prompt_tokens is not None:
        check_served(models, model, probe.prompt_tokens + prepared.longest_output)
        if load.sessions:
            check_session_length(models, model, load.max_turns, probe.prompt_tokens + prepared.longest_output)
    return prepared


def check_session_length(models: list[ServedModel], model: str, turns: int, longest_turn: int) -> None:
    """A session of ``turns`` turns, each up to ``longest_turn`` tokens with its answer, fits the model.

    Raises:
        WorkloadInputError: its history would outgrow ``max_model_len``.
    """
    found = next((m for m in models if m.id == model), None)
    longest = turns * longest_turn
    if found is not None and found.max_model_len is not None and longest > found.max_model_len:
        raise WorkloadInputError(
            f"a session of up to {turns} turns sends up to {longest} tokens of history (each turn up to "
            f"{longest_turn} with its answer): more than '{model}''s max_model_len {found.max_model_len}",
            "lower --turns, --input-tokens or --output-tokens",
        )
