"""``compare`` of a Hugging Face LLM: the request from ``compare``'s options, the table (shared)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from tritongen.cli.console import console, run_with_status
from tritongen.cli.options.given import refuse_given
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.rounds import AutoRoundsFlags
from tritongen.client.address import ServerAddress
from tritongen.compare.llm.figures import FIGURES, HIGHER_IS_BETTER
from tritongen.compare.llm.result import compare_document
from tritongen.compare.llm.runner import LlmCompareRequest, run_llm_compare
from tritongen.errors import ConfigError
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.llm.spec import Slo, parse_slo, parse_token_count
from tritongen.loadtest.spec import LoadSpec, parse_duration

DEFAULT_LEVEL = 4


@dataclass(frozen=True)
class LlmCompareInput:
    """What ``compare`` hands over, as its options gave it."""

    source: Path
    name: str
    work: Path
    concurrency: str | None
    """None: not given (one level, 4)."""
    duration: str
    warmup: str
    seed: int
    llm: LlmFlags
    classic: tuple[str, ...]
    """The classic engines' options given (refused)."""
    rounds: AutoRoundsFlags


def llm_compare_request(given: LlmCompareInput) -> LlmCompareRequest:
    """The comparison of a language model; the classic engines' options refused.

    Raises:
        ConfigError: a classic option, several load levels, or a malformed setting.
    """
    refuse_given(
        given.classic,
        "does not apply to a language model: compare puts vLLM's OpenAI server beside vLLM inside Triton",
        "give the load (--concurrency N, --duration, --rounds), the prompts (--input-tokens, --prompts)",
    )
    level = DEFAULT_LEVEL
    if given.concurrency is not None:
        levels = [item for item in given.concurrency.split(",") if item.strip()]
        if len(levels) != 1 or not levels[0].strip().isdigit() or int(levels[0]) < 1:
            raise ConfigError(
                f"--concurrency {given.concurrency}: an LLM comparison measures at one level",
                "e.g. --concurrency 4",
            )
        level = int(levels[0])
    flags = given.llm
    llm = LlmLoad(
        api="openai-completions",
        tokenizer=flags.tokenizer or given.source,
        input_tokens=parse_token_count(flags.input_tokens, "--input-tokens"),
        output_tokens=parse_token_count(flags.output_tokens, "--output-tokens"),
        prompts=flags.prompts,
        slo=parse_slo(flags.slo) if flags.slo else Slo(),
    )
    llm.check()
    spec = LoadSpec(
        model=given.name,
        address=ServerAddress.openai("localhost:8000"),  # each contender's own, once it runs
        levels=(level,),
        duration_s=parse_duration(given.duration, "--duration"),
        warmup_s=parse_duration(given.warmup, "--warmup"),
        seed=given.seed,
        llm=llm,
    )
    count, rule = given.rounds.rule(default_auto=False)
    return LlmCompareRequest(given.source, given.name, given.work, spec, rounds=count, rule=rule)


def run_and_show(request: LlmCompareRequest, json_path: Path | None) -> None:
    """Run the comparison, show it, write its document."""
    report = run_with_status(
        f"comparing vLLM's OpenAI server and vLLM inside Triton on [bold]{escape(str(request.source))}[/]: "
        f"the same prompts at concurrency {request.spec.levels[0]:g}, interleaved rounds",
        "comparing",
        lambda say: run_llm_compare(request, say=say),
    )
    document = compare_document(report, request)
    if json_path is not None:
        from tritongen.io.files import write_output

        write_output(json_path, json.dumps(document, indent=2) + "\n")
    show_document(document)


COLUMNS = (
    "rank",
    "server",
    "goodput/s",
    "tokens/s",
    "TTFT p50/p99 ms",
    "ITL p50/p99 ms",
    "memory MiB",
    "cold start s",
)


def show_document(document: dict[str, Any]) -> None:
    """The contenders by rank with their medians, Triton's ratio over vLLM's server, the decision."""
    contenders, ratios = document["contenders"], document["triton_over_vllm"]
    table = Table(title=f"{document['source']}: {document['rounds']} round(s), medians")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "server" else "right")
    for row in document["ranking"]:
        entry = contenders[row["contender"]]
        if row.get("unavailable"):
            table.add_row("–", escape(row["label"]), escape(row["unavailable"]), "", "", "", "", "")
            continue
        m = entry["medians"]
        ttft = f"{_ms(m['ttft_p50_us'])} / {_ms(m['ttft_p99_us'])}"
        itl = f"{_ms(m['itl_p50_us'])} / {_ms(m['itl_p99_us'])}"
        memory = _num((entry["memory_peak_bytes"] or 0) / 2**20, 0)
        goodput, tokens = _num(m["goodput_per_s"], 2), _num(m["output_tokens_per_s"], 0)
        cold = _num(entry["cold_start_s"], 0)
        table.add_row(str(row["rank"]), escape(row["label"]), goodput, tokens, ttft, itl, memory, cold)
    console.print(table)
    for figure in FIGURES:
        ratio = ratios.get(figure)
        if ratio is None:
            continue
        better = "higher is better" if figure in HIGHER_IS_BETTER else "lower is better"
        interval = (
            f"[{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"
            if ratio["ci_low"] is not None
            else "(one round)"
        )
        line = f"Triton / vLLM's server, {figure}: {ratio['estimate']:.2f}× {interval} ({better})"
        console.print(line, highlight=False, markup=False)
    console.print(f"decided on goodput: {document['decision']['verdict']}", highlight=False, markup=False)
    console.print(f"{document['wall_s'] / 60:.1f} min in all", highlight=False, markup=False)


def _num(value: object, digits: int) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:.{digits}f}"


def _ms(value: object) -> str:
    return "–" if not isinstance(value, int | float) else f"{value / 1000:.1f}"
