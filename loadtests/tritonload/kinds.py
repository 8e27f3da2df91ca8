"""The load kinds, registered in this one place: each kind's name and the module that sends its load.

A kind is what a load test's requests are (tensors, a sequence model's sequences, a decoupled
model's streams, prompts to a language model, tensors through shared memory, the null load).
``--triton-kind NAME`` picks one; its module here builds each user's load
(``user_load(host, options, process, environment)``). tritongen finds its own side of a kind
by the same name (``tritongen/loadtest/kinds/<name>.py``), so one line here adds a kind to both.
Without ``--triton-kind`` the kind follows the older options (``--triton-llm-api``,
``--triton-sequences``, ``--triton-streaming``, ``--triton-shared-memory``), so the locustfile
keeps its command line when run on its own.

This module imports only the standard library at its top: tritongen reads :data:`KINDS`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .options import TritonOptions
    from .state import ProcessState

KINDS: dict[str, str] = {
    "openai": "llm_transport",
    "triton-llm": "llm_transport",
    "sequence": "sequences",
    "stream": "grpc_stream",
    "shared-memory": "shared_memory",
    "tensor": "transports",
    "null": "null_load",
}
"""Each kind's name and the module of this package that sends its load, in the order
``--load-kind auto`` asks them whether a load is theirs."""
AUTO_KIND = "auto"


class UserLoad(Protocol):
    """One user's load: it sends until Locust stops the user."""

    def run(self) -> None:
        """Send until stopped."""


def kind_of(options: TritonOptions) -> str:
    """``--triton-kind``, or the kind the older options call for when it is ``auto``.

    Raises:
        ValueError: a kind this load generator does not have.
    """
    if options.kind != AUTO_KIND:
        if options.kind not in KINDS:
            raise ValueError(f"--triton-kind {options.kind!r} is not one of {', '.join(KINDS)}")
        return options.kind
    if options.llm_api:
        return "openai" if options.llm_api.startswith("openai") else "triton-llm"
    if options.sequences:
        return "sequence"
    if options.streaming:
        return "stream"
    return "shared-memory" if options.shared_memory == "system" else "tensor"


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> UserLoad:
    """The load of one user of ``options``'s kind, built by that kind's module.

    Raises:
        ValueError: an unknown kind, or options the kind cannot send.
    """
    module = importlib.import_module(f".{KINDS[kind_of(options)]}", __package__)
    load: UserLoad = module.user_load(host, options, process, environment)
    return load
