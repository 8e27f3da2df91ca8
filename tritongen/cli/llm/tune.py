"""``tune`` of a local vLLM model: the engine settings to try, the run, what is shown (shared by ``tune``)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tritongen.cli.config_change import show_diff
from tritongen.cli.console import console, run_with_status
from tritongen.cli.options.given import refuse_given
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.load import LoadFlags, RunFlags, load_spec
from tritongen.cli.options.parsing import parse_int_list
from tritongen.cli.options.rounds import AutoRoundsFlags
from tritongen.convert.llm.files import WEIGHTS_DIR
from tritongen.errors import ConfigError
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.llm.spec import Slo, parse_slo, parse_token_count
from tritongen.pipeline.rerender import write_rerender
from tritongen.triton.proto import read_config
from tritongen.tune.llm.apply import plan_llm_apply
from tritongen.tune.llm.measure import LlmMeasurement
from tritongen.tune.llm.report import tune_document
from tritongen.tune.llm.runner import LlmTuneReport, LlmTuneRequest, run_llm_tune
from tritongen.tune.llm.space import EngineSpace, current_settings, parse_flags

PANEL = "LLM engine (a local vLLM model)"
LLM_LOAD_FIELDS = ("tokenizer", "input_tokens", "output_tokens", "prompts", "slo")
"""The LLM load options ``tune`` and ``compare`` take (of loadtest's :class:`LlmFlags`)."""
LLM_TUNE_FIELDS = (
    *LLM_LOAD_FIELDS,
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "prefix_caching",
)


@dataclass(frozen=True)
class LlmTuneFlags(LlmFlags):
    """A local vLLM model's load (loadtest's options) and the engine settings its tune tries."""

    # --max-num-seqs, --max-num-batched-tokens, --chunked-prefill and --prefix-caching are not the
    # engine options of convert (cli/llm_engine_options.py): each takes the values to try.
    max_num_seqs: Annotated[
        str | None,
        typer.Option(
            "--max-num-seqs",
            help="max_num_seqs values to try, e.g. 4,16 (default: the model's and a quarter of it).",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    max_num_batched_tokens: Annotated[
        str | None,
        typer.Option(
            "--max-num-batched-tokens",
            help="max_num_batched_tokens values to try (default: the model's and its max_model_len).",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    chunked_prefill: Annotated[
        str, typer.Option("--chunked-prefill", help="Chunked prefill to try: on,off.", rich_help_panel=PANEL)
    ] = "on,off"
    prefix_caching: Annotated[
        str,
        typer.Option(
            "--prefix-caching",
            help="Prefix caching to try: on,off, or auto (both when the --prompts share a prefix, else the "
            "model's: synthetic prompts never do).",
            rich_help_panel=PANEL,
        ),
    ] = "auto"

    def engine_space(self, parameters: dict[str, str], prompts: Path | None) -> EngineSpace:
        """The values to try around the model's own settings.

        Raises:
            ConfigError: a malformed list, or a value below 1.
        """
        current, max_model_len = current_settings(parameters)
        seqs = parse_int_list(self.max_num_seqs, "--max-num-seqs") or tuple(
            dict.fromkeys((current.max_num_seqs, max(1, current.max_num_seqs // 4)))
        )
        tokens = parse_int_list(self.max_num_batched_tokens, "--max-num-batched-tokens") or tuple(
            dict.fromkeys((current.max_num_batched_tokens, max_model_len))
        )
        if min(seqs) < 1 or min(tokens) < 1:
            raise ConfigError("engine settings to try must be at least 1", "e.g. --max-num-seqs 4,16")
        chunked = parse_flags(self.chunked_prefill, "--chunked-prefill") or (current.chunked_prefill,)
        prefix: tuple[bool, ...]
        if self.prefix_caching.strip().lower() == "auto":
            prefix = (True, False) if shared_prefix(prompts) else (current.prefix_caching,)
        else:
            prefix = parse_flags(self.prefix_caching, "--prefix-caching") or (current.prefix_caching,)
        return EngineSpace(seqs, tokens, chunked, prefix)


def shared_prefix(prompts: Path | None, chars: int = 64) -> bool:
    """Whether two prompts of a prompts file open alike (their first ``chars`` characters)."""
    if prompts is None or not prompts.is_file():
        return False
    seen: set[str] = set()
    for line in prompts.read_text(encoding="utf-8", errors="replace").splitlines():
        head = line.strip()[:chars]
        if len(head) == chars and head in seen:
            return True
        seen.add(head)
    return False


@dataclass(frozen=True)
class LlmTuneInput:
    """What ``tune`` hands over: its options, as the command took them."""

    model: str
    repo: Path
    load: LoadFlags
    run: RunFlags
    llm: LlmTuneFlags
    classic: tuple[str, ...]
    """The batching and instance options given (refused)."""
    rounds: AutoRoundsFlags
    max_trials: int | None
    url: str | None
    admin_key: str | None


def llm_tune_request(given: LlmTuneInput) -> LlmTuneRequest:
    """The tune of a local vLLM model from ``tune``'s options; batching and instance options refused.

    Raises:
        ConfigError: a classic option, more than one load level, or a malformed setting.
    """
    refuse_given(
        given.classic,
        f"tunes batching and instances; {given.model} is a local vLLM model",
        "search its engine: --max-num-seqs, --max-num-batched-tokens, --chunked-prefill and so on",
    )
    base = read_config(given.repo / given.model / "config.pbtxt")
    load = given.load
    if not load.concurrency and not load.rate:
        load = dataclasses.replace(load, concurrency="4")
    spec = load_spec(given.model, given.url, load, given.run)
    if len(spec.levels) != 1:
        raise ConfigError("an LLM tune measures at one load level", "give one, e.g. --concurrency 4")
    flags = given.llm
    tokenizer = flags.tokenizer or given.repo / given.model / "1" / WEIGHTS_DIR
    api = "triton-grpc" if spec.protocol == "grpc" else "triton-generate"
    llm = LlmLoad(
        api=api,  # type: ignore[arg-type]
        tokenizer=tokenizer,
        input_tokens=parse_token_count(flags.input_tokens, "--input-tokens"),
        output_tokens=parse_token_count(flags.output_tokens, "--output-tokens"),
        prompts=flags.prompts,
        slo=parse_slo(flags.slo) if flags.slo else Slo(),
    )
    llm.check()
    count, rule = given.rounds.rule(default_auto=True)
    return LlmTuneRequest(
        model=given.model,
        repo=given.repo,
        spec=dataclasses.replace(spec, llm=llm),
        space=given.llm.engine_space(base.parameters, flags.prompts),
        max_trials=given.max_trials,
        seed=load.seed,
        rounds=count,
        rule=rule,
        url=given.url,
        admin_key=given.admin_key,
    )


def tune_llm(given: LlmTuneInput, json_path: Path | None, apply: bool, diff: bool) -> None:
    """``tune`` of a local vLLM model: its engine's settings; batching options refused in one line."""
    if diff and not apply:
        raise ConfigError("--diff shows what --apply would write", "add --apply")
    run_and_show(llm_tune_request(given), json_path, apply, diff)


def run_and_show(request: LlmTuneRequest, json_path: Path | None, apply: bool, diff: bool) -> None:
    """Run the tune, show it, write its document, and apply the winner where it beat the baseline."""
    llm = request.spec.llm
    slo = (
        llm.slo.text() if llm is not None and llm.slo.text() else "no limit (goodput: every finished request)"
    )
    report = run_with_status(
        f"tuning the engine of [bold]{escape(request.model)}[/]: goodput within {escape(slo)} at "
        f"{request.spec.mode} {request.spec.levels[0]:g}; each trial restarts its engine",
        "tuning",
        lambda say: run_llm_tune(request, say=say),
    )
    if json_path is not None:
        from tritongen.io.files import write_output

        write_output(json_path, json.dumps(tune_document(report, request), indent=2) + "\n")
    show_report(report)
    if apply and report.winner is not None and report.winner != report.baseline:
        plan = plan_llm_apply(request.repo / request.model, report.winner)
        if diff:
            show_diff(plan)
        else:
            write_rerender(plan)
            console.print(plan.summary(), highlight=False, soft_wrap=True, markup=False)
    elif apply:
        console.print("nothing applied: the model's own settings stay (no trial beat them)", highlight=False)


def show_report(report: LlmTuneReport) -> None:
    """The trials, the confirmation, the winner and what the restarts cost."""
    table = Table(title=f"engine settings of {report.model}")
    for column in ("settings", "restart s", "goodput/s", "TTFT p99 ms", "ITL p99 ms", "tokens/s", "errors"):
        table.add_column(column, justify="left" if column == "settings" else "right")
    rows: list[tuple[str, float | None, LlmMeasurement | None]] = [
        (f"{report.baseline.key} (baseline)", None, report.baseline_measurement)
    ]
    rows += [(t.candidate.key, t.reload_s, t.measurement) for t in report.trials]
    for key, reload_s, m in rows:
        if m is None or m.failed:
            table.add_row(
                key, _seconds(reload_s), escape(m.failed or "" if m else "not measured"), "", "", "", ""
            )
            continue
        table.add_row(
            key, _seconds(reload_s), f"{m.goodput_per_s:.2f}", _ms(m.ttft_p99_us), _ms(m.itl_p99_us),
            f"{m.output_tokens_per_s:.0f}", str(m.errors),
        )  # fmt: skip
    console.print(table)
    confirmation = report.confirmation
    if confirmation is not None and confirmation.verdict is not None:
        console.print(
            f"confirmation, {len(confirmation.baseline_goodput)} round(s): {confirmation.finalist.key} "
            f"over the baseline, goodput {confirmation.verdict.text()}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    winner = report.winner
    verdict = "the baseline stays" if winner == report.baseline else "it beat the baseline"
    console.print(f"best: {winner.key if winner else '–'} ({verdict})", highlight=False, markup=False)
    start = f"server start {report.server_start_s:.0f} s, " if report.server_start_s is not None else ""
    console.print(
        f"cost: {start}engine restarts {report.reload_total_s:.0f} s over {len(report.trials)} trial(s), "
        f"{report.wall_s / 60:.1f} min in all",
        highlight=False,
        markup=False,
    )


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value / 1000:.1f}"
