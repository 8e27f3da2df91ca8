"""One self-contained HTML page from convert, loadtest, tune and compare results: tables and plots.

The page has no external assets: its style is inline and every plot is a PNG inside an
``data:`` URI, so the file can be mailed, attached to a CI run or opened offline.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen import __version__
from tritongen.compare.result import CompareReport
from tritongen.io.files import write_output
from tritongen.loadtest.result import LoadTestReport
from tritongen.pipeline.document import ConvertDocument
from tritongen.report.compare_tables import compare_table, rounds_fact
from tritongen.report.convert_tables import precision_tables, verification_table
from tritongen.report.documents import ResultReport, read_result
from tritongen.report.loadtest_tables import loadtest_report_tables
from tritongen.report.table_data import TableData
from tritongen.report.tune_tables import background_facts, tune_table
from tritongen.tune.document import ConfirmationEntry, SearchBest, TuneDocument

REPORT_TEMPLATE = "report.html.j2"


@dataclass
class Figure:
    """One embedded plot."""

    caption: str
    png_base64: str


@dataclass
class Section:
    """One result document on the page."""

    kind: str
    title: str
    source: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    tables: list[TableData] = field(default_factory=list)
    recommendations: list[tuple[str, str]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _figure(caption: str, fig: Any) -> Figure:
    from tritongen.report.plots import png_bytes

    return Figure(caption, base64.b64encode(png_bytes(fig)).decode("ascii"))


def loadtest_section(report: LoadTestReport, source: str) -> Section:
    """Runs table and latency-vs-throughput plot of a load test."""
    from tritongen.report.llm_plots import is_llm_report, tokens_figure
    from tritongen.report.plots import latency_figure

    section = Section(
        kind="load test",
        title=f"Load test of {report.model}",
        source=source,
        facts=[
            ("model", report.model),
            ("server", f"{report.url} ({report.protocol})"),
            ("status", report.status),
            ("runs", str(len(report.runs))),
            ("rounds", f"{report.rounds} per level, levels interleaved"),
        ],
        tables=loadtest_report_tables(report),
    )
    if any(r.latency_us for r in report.runs):
        caption = "Latency against throughput, one point per run"
        if report.rounds > 1:
            caption = f"Latency against throughput: per level, median of {report.rounds} rounds and interval"
        section.figures.append(_figure(caption, latency_figure(report)))
    if any(run.server_trace and run.server_trace["splits"] for run in report.runs):
        from tritongen.report.trace_report import trace_figure

        caption = "Where the time went (server trace): the median request and the slowest 1%, in µs"
        section.figures.append(_figure(caption, trace_figure(report)))
    if is_llm_report(report):
        caption = (
            "Time to first token and inter-token latency (P50, P99), and output tokens/s, against the load"
        )
        section.figures.append(_figure(caption, tokens_figure(report)))
    return section


def _confirmation_text(confirmation: ConfirmationEntry) -> str:
    """``2 finalist(s) and the current config, 4 of 5 interleaved rounds, 95% intervals``."""
    finalists = len(confirmation.contenders) - 1
    stopping = confirmation.stopping
    most = "at most " if stopping is not None else ""
    stopped = f" (--rounds auto: {stopping.stopped})" if stopping is not None else ""
    return (
        f"{finalists} finalist(s) and the current config, {confirmation.completed_rounds} of "
        f"{most}{confirmation.rounds} interleaved rounds{stopped}, {confirmation.confidence:.0%} intervals"
    )


def tune_section(document: TuneDocument, source: str) -> Section:
    """Trials table, verdict and throughput/P99 plot of a tune (confirmed configs with their intervals)."""
    from tritongen.report.plots import confirmed_points, tune_figure, tune_points

    best, slo = document.best, document.slo_p99_ms
    facts = [
        ("model", document.model),
        ("P99 budget", f"{slo:g} ms" if slo is not None else "none"),
        (
            "strategy",
            f"{document.strategy} ({len(document.trials)} trials of {document.grid_size} legal configs)",
        ),
        ("status", document.status),
    ]
    if document.load_model not in (None, document.model):
        facts.insert(1, ("load on", f"{document.load_model} (the model tuned is one it calls)"))
    if document.confirmation is not None:
        facts.append(("confirmation", _confirmation_text(document.confirmation)))
    if document.verdict:
        facts.append(("verdict", document.verdict))
    elif isinstance(best, SearchBest):  # tritongen.tune/1: one measurement per config
        gain = best.gain_over_baseline
        facts.append(
            (
                "best",
                f"{best.key}: {best.infer_per_s:,.0f} infer/s"
                + (f", {gain:.2f}× the baseline" if gain is not None else ""),
            )
        )
    section = Section(
        kind="tune",
        title=f"Tuning of {document.model}",
        source=source,
        facts=facts + background_facts(document),
        tables=[tune_table(document)],
    )
    points, baseline = tune_points(document)
    confirmed = confirmed_points(document)
    if points or confirmed:
        section.figures.append(
            _figure(
                "Throughput against P99 per trial; the front joins the configs nothing beats on both"
                + ("; diamonds: configs confirmed in rounds, bars their intervals" if confirmed else ""),
                tune_figure(points, f"tune {document.model}", slo, baseline, confirmed),
            )
        )
    if best is None:
        section.warnings.append("no config met the P99 budget")
    return section


def compare_section(report: CompareReport, source: str) -> Section:
    """Engines table, recommendations, bars and per-engine latency curves of a comparison."""
    from tritongen.report.plots import compare_latency_figure, engines_figure

    hardware = report.hardware_facts()
    settings = report.compare_settings()
    facts = [
        ("source", report.source),
        (
            "hardware",
            f"{hardware.cpu or '?'}, {hardware.cpus or '?'} CPUs"
            + (f", {len(hardware.gpus)} GPU(s)" if hardware.gpus else ", no GPU"),
        ),
        ("server", f"Triton {hardware.triton_version or '?'} at {hardware.server_url or '?'}"),
        (
            "load",
            f"{settings.duration_s} s per measurement after {settings.warmup_s} s warm-up; "
            f"concurrency {settings.concurrency_levels} at batch {settings.batch_size_throughput}",
        ),
        ("rounds", rounds_fact(report, settings)),
        ("status", report.status),
    ]
    section = Section(
        kind="compare",
        title=f"Engines for {report.name}",
        source=source,
        facts=facts,
        tables=[
            compare_table(report),
            *precision_tables([(e.label, e.accuracy) for e in report.engines if e.accuracy is not None]),
        ],
        recommendations=[(r.title, r.reason) for r in report.recommendations],
    )
    if any(e.ok for e in report.engines):
        section.figures.append(_figure("Each engine's figures side by side", engines_figure(report)))
    if any(e.latency_runs for e in report.engines):
        section.figures.append(
            _figure("P99 against throughput as concurrency rises, per engine", compare_latency_figure(report))
        )
    if report.status != "ok":
        section.warnings.append(f"the comparison ended early ({report.status}): the figures are partial")
    return section


def convert_section(document: ConvertDocument, source: str) -> Section:
    """Verification of every model directory a conversion wrote, and the drift of reduced variants."""
    settings = document.precision()
    facts = [
        ("source", document.source),
        ("signature", document.signature),
        ("repository", f"{document.repo} (target {document.target})"),
    ]
    if settings.calibration_data:
        facts.append(("calibration", f"{settings.calibration_data} ({settings.calibration_method})"))
    section = Section(
        kind="convert",
        title=f"Conversion of {document.name}",
        source=source,
        facts=facts,
        tables=[verification_table(document.outcomes), *precision_tables(document.precision_entries())],
    )
    section.warnings += [
        f"{o.label} {o.status}: {o.reason}" for o in document.outcomes if o.status in ("failed", "kept")
    ]
    return section


def section_for(report: ResultReport, source: str) -> Section:
    """The section of one result, by its kind."""
    if isinstance(report, ConvertDocument):
        return convert_section(report, source)
    if isinstance(report, LoadTestReport):
        return loadtest_section(report, source)
    if isinstance(report, TuneDocument):
        return tune_section(report, source)
    return compare_section(report, source)


def render_report(reports: list[tuple[str, ResultReport]], templates_dir: Path | None = None) -> str:
    """The HTML page of ``reports`` ((source name, report) each), in the order given."""
    from tritongen.triton.templates import render_template

    sections = [section_for(report, source) for source, report in reports]
    return render_template(
        REPORT_TEMPLATE,
        templates_dir,
        sections=sections,
        generated=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        version=__version__,
    )


def write_report(paths: list[Path], output: Path, templates_dir: Path | None = None) -> Path:
    """Read result JSON files, each once into its typed report, and write their page to ``output``.

    Raises:
        ConfigError: an input is missing or not a tritongen result.
        RepositoryError: ``output`` cannot be written.
    """
    reports = [(path.name, read_result(path)) for path in paths]
    return write_documents(reports, output, templates_dir)


def write_documents(
    reports: list[tuple[str, ResultReport]], output: Path, templates_dir: Path | None = None
) -> Path:
    """Write the report page of results in memory ((source name, report) each) to ``output`` (atomically)."""
    return write_output(output, render_report(reports, templates_dir))
