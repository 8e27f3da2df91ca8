"""Load kinds as plug-ins: one registry of names, each kind's module found by it on both sides.

What ``--load-kind auto`` picks for a load (from its options and, where they leave it open,
the model's config), what a kind asked by name refuses, and which kind the load generator
runs for a command line without ``--triton-kind`` (the older options decide).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tritongen.loadtests.tritonload.kinds import kind_of
from tritongen.loadtests.tritonload.options import TritonOptions

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import KINDS, OPTIONS
from tritongen.loadtest.kinds.base import LoadKind
from tritongen.loadtest.kinds.registry import kind_names, load_kinds, resolve_kind, run_notes
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.spec import LoadSpec

from support.paths import ROOT

SPEC = LoadSpec(model="m", address=ServerAddress.parse("127.0.0.1:8000"))
SEQUENCE_CONFIG = {"sequence_batching": {"direct": {}}}
DECOUPLED_CONFIG = {"model_transaction_policy": {"decoupled": True}}


def _config(config: dict[str, Any]) -> Any:
    def read() -> dict[str, Any]:
        return config

    return read


def _unread() -> dict[str, Any]:
    raise AssertionError("a kind asked for the model's config where the options decide")


def test_every_registered_kind_has_its_module_here() -> None:
    kinds = load_kinds()
    assert list(kinds) == list(KINDS) and kind_names() == ("auto", *KINDS)
    assert all(isinstance(kind, LoadKind) and kind.name == name for name, kind in kinds.items())


@pytest.mark.parametrize(
    ("changes", "config", "kind"),
    [
        ({}, {}, "tensor"),
        ({}, SEQUENCE_CONFIG, "sequence"),  # refused when prepared: it needs --sequences
        ({"sequences": True}, {}, "sequence"),  # refused when prepared: not a sequence model
        ({}, DECOUPLED_CONFIG, "stream"),
        ({"shared_memory": "system"}, {}, "shared-memory"),
        ({"shared_memory": "system"}, DECOUPLED_CONFIG, "stream"),  # which refuses shared memory
    ],
)
def test_auto_picks_the_kind_the_options_and_the_model_call_for(
    changes: dict[str, Any], config: dict[str, Any], kind: str
) -> None:
    assert resolve_kind(replace(SPEC, **changes), _config(config)).name == kind


@pytest.mark.parametrize(("api", "kind"), [("openai-chat", "openai"), ("triton-generate", "triton-llm")])
def test_an_llm_load_is_its_api_s_kind_without_asking_the_model(api: str, kind: str) -> None:
    spec = replace(SPEC, llm=LlmLoad(api=api, prompts=Path("prompts.jsonl")))  # type: ignore[arg-type]
    assert resolve_kind(spec, _unread).name == kind


@pytest.mark.parametrize(
    ("kind", "changes", "message"),
    [
        ("stream", {"sequences": True}, "--load-kind stream does not go with --sequences"),
        ("tensor", {"shared_memory": "system"}, "--load-kind tensor does not go with --shared-memory system"),
        ("sequence", {}, "--load-kind sequence takes its load from --sequences N"),
        ("shared-memory", {}, "--load-kind shared-memory takes its load from --shared-memory system"),
    ],
)
def test_a_kind_asked_by_name_takes_only_its_own_options(
    kind: str, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_kind(replace(SPEC, kind=kind, **changes), _unread)
    assert message in raised.value.message and "\n" not in str(raised.value)


def test_an_unknown_kind_is_refused_as_the_spec_is_made() -> None:
    with pytest.raises(ConfigError, match="--load-kind 'bursty' is unknown"):
        replace(SPEC, kind="bursty")


def test_a_line_two_kinds_give_shows_once() -> None:
    run = RunResult(
        mode="concurrency", concurrency=1, target_rate=None, batch_size=1, duration_s=1.0, requests=2,
        errors=0, errors_by_kind={}, qps=2.0, infer_per_s=2.0, latency_us=None, server_us=None,
        avg_batch=None, stable=True, gpu=None, cpu=None, output_tokens_per_s=12.5,
        ttft_us={"p50": 1500.0, "p99": 2500.0}, output_token_source="usage",
    )  # fmt: skip
    notes = run_notes(run)
    assert (
        len(notes) == 1 and notes[0].startswith("TTFT 1.50 / 2.50 ms") and "12.5 output tokens/s" in notes[0]
    )
    assert run_notes(replace(run, output_tokens_per_s=None)) == []


def _options(**given: Any) -> TritonOptions:
    values = {option.name.replace("-", "_"): option.default for option in OPTIONS}
    return TritonOptions(**{**values, **given})


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ({}, "tensor"),
        ({"llm_api": "openai-chat"}, "openai"),
        ({"llm_api": "triton-grpc", "protocol": "grpc"}, "triton-llm"),
        ({"sequences": 1}, "sequence"),
        ({"streaming": 1, "protocol": "grpc"}, "stream"),
        ({"shared_memory": "system"}, "shared-memory"),
        ({"kind": "stream", "protocol": "grpc"}, "stream"),
    ],
)
def test_the_load_generator_runs_the_kind_named_or_the_one_its_older_options_call_for(
    given: dict[str, Any], kind: str
) -> None:
    assert kind_of(_options(**given)) == kind


def test_the_load_generator_refuses_a_kind_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="--triton-kind 'bursty' is not one of"):
        kind_of(_options(kind="bursty"))


def test_every_registered_kind_has_its_page() -> None:
    pages = {page.stem for page in (ROOT / "docs" / "kinds").glob("*.md")} - {"README"}
    assert pages == set(KINDS)
