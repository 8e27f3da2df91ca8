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
from tritongen.client.openai_api import check_served, probe_request, served_models
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
    return prepared
