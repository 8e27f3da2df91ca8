"""One self-contained HTML page from loadtest, tune and compare JSON: tables and embedded plots.

The page has no external assets: its style is inline and every plot is a PNG inside an
``data:`` URI, so the file can be mailed, attached to a CI run or opened offline.
"""

from __future__ import annotations

import base64
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen import __version__
from tritongen.compare.result import SCHEMA as COMPARE_SCHEMA
from tritongen.compare.result import CompareReport
from tritongen.errors import ConfigError
from tritongen.io.files import write_output
from tritongen.io.loadgen_shared import SCHEMA as LOADTEST_SCHEMA
from tritongen.loadtest.result import LoadTestReport
from tritongen.pipeline.request import CONVERT_SCHEMA
from tritongen.report.tables import (
    TableData,
    accuracy_table,
    background_facts,
    compare_table,
    loadtest_models_table,
    loadtest_rounds_table,
    loadtest_table,
    mixed_precision_table,
    sequence_table,
    server_models_table,
    streaming_table,
    tune_table,
    verification_table,
)
from tritongen.tune.report import READABLE_SCHEMAS as TUNE_SCHEMAS

REPORT_TEMPLATE = "report.html.j2"
SCHEMAS = (LOADTEST_SCHEMA, *TUNE_SCHEMAS, COMPARE_SCHEMA, CONVERT_SCHEMA)


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


def read_document(path: Path) -> dict[str, Any]:
    """Read a result JSON written by tritongen.

    Raises:
        ConfigError: the file is missing, not JSON, or not a convert, loadtest, tune or compare result.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(
            f"{path} does not exist", "pass a JSON written by convert, loadtest, tune or compare"
        ) from e
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path} is not a JSON document: {e}", "pass the file written by --json") from e
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema not in SCHEMAS:
        raise ConfigError(
            f"{path} is not a tritongen result (schema {schema!r})",
            f"report reads {', '.join(SCHEMAS)}",
        )
    return dict(document)


def _figure(caption: str, fig: Any) -> Figure:
    from tritongen.report.plots import png_bytes

    return Figure(caption, base64.b64encode(png_bytes(fig)).decode("ascii"))


def loadtest_section(document: dict[str, Any], source: str) -> Section:
    """Runs table and latency-vs-throughput plot of a load test."""
    from tritongen.report.llm_plots import is_llm_report, tokens_figure
    from tritongen.report.plots import latency_figure

    report = LoadTestReport.from_json(document)
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
        tables=[loadtest_table(document)],
    )
    over_rounds = loadtest_rounds_table(document)
    if over_rounds is not None:
        section.tables.append(over_rounds)
    streams = streaming_table(document)
    if streams is not None:
        section.tables.append(streams)
    sequences = sequence_table(document)
    if sequences is not None:
        section.tables.append(sequences)
    mixed = loadtest_models_table(document)
    if mixed is not None:
        section.tables.append(mixed)
    per_model = server_models_table(document)
    if per_model is not None:
        section.tables.append(per_model)
    if any(r.latency_us for r in report.runs):
        caption = "Latency against throughput, one point per run"
        if report.rounds > 1:
            caption = f"Latency against throughput: per level, median of {report.rounds} rounds and interval"
        section.figures.append(_figure(caption, latency_figure(report)))
    if is_llm_report(report):
        caption = (
            "Time to first token and inter-token latency (P50, P99), and output tokens/s, against the load"
        )
        section.figures.append(_figure(caption, tokens_figure(report)))
    return section


def _confirmation_text(confirmation: dict[str, Any]) -> str:
    """``2 finalist(s) and the current config, 4 of 5 interleaved rounds, 95% intervals``."""
    finalists = len(confirmation.get("contenders") or {}) - 1
    stopping = confirmation.get("stopping")
    most = "at most " if isinstance(stopping, dict) else ""
    stopped = f" (--rounds auto: {stopping.get('stopped')})" if isinstance(stopping, dict) else ""
    return (
        f"{finalists} finalist(s) and the current config, {confirmation.get('completed_rounds')} of "
        f"{most}{confirmation.get('rounds')} interleaved rounds{stopped}, "
        f"{float(confirmation['confidence']):.0%} intervals"
    )


def tune_section(document: dict[str, Any], source: str) -> Section:
    """Trials table, verdict and throughput/P99 plot of a tune (confirmed configs with their intervals)."""
    from tritongen.report.plots import confirmed_points, tune_figure, tune_points

    best = document.get("best")
    slo = document.get("slo_p99_ms")
    confirmation = document.get("confirmation") or {}
    facts = [
        ("model", str(document.get("model"))),
        ("P99 budget", f"{slo:g} ms" if slo is not None else "none"),
        (
            "strategy",
            f"{document.get('strategy')} ({len(document.get('trials') or [])} trials "
            f"of {document.get('grid_size')} legal configs)",
        ),
        ("status", str(document.get("status"))),
    ]
    if document.get("load_model") not in (None, document.get("model")):
        facts.insert(1, ("load on", f"{document['load_model']} (the model tuned is one it calls)"))
    if confirmation:
        facts.append(("confirmation", _confirmation_text(confirmation)))
    if document.get("verdict"):
        facts.append(("verdict", str(document["verdict"])))
    elif isinstance(best, dict):  # tritongen.tune/1: one measurement per config
        gain = best.get("gain_over_baseline")
        facts.append(
            (
                "best",
                f"{best['key']}: {float(best['infer_per_s']):,.0f} infer/s"
                + (f", {gain:.2f}× the baseline" if isinstance(gain, int | float) else ""),
            )
        )
    section = Section(
        kind="tune",
        title=f"Tuning of {document.get('model')}",
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
                tune_figure(points, f"tune {document.get('model')}", slo, baseline, confirmed),
            )
        )
    if best is None:
        section.warnings.append("no config met the P99 budget")
    return section


def compare_section(document: dict[str, Any], source: str) -> Section:
    """Engines table, recommendations, bars and per-engine latency curves of a comparison."""
    from tritongen.report.plots import compare_latency_figure, engines_figure

    report = CompareReport.from_json(document)
    host = report.hardware.get("host") or {}
    server = report.hardware.get("server") or {}
    gpus = server.get("gpus") or host.get("gpus") or []
    settings = report.settings
    facts = [
        ("source", report.source),
        (
            "hardware",
            f"{host.get('cpu', '?')}, {host.get('cpus', '?')} CPUs"
            + (f", {len(gpus)} GPU(s)" if gpus else ", no GPU"),
        ),
        ("server", f"Triton {server.get('triton_version') or '?'} at {server.get('url') or '?'}"),
        (
            "load",
            f"{settings.get('duration_s')} s per measurement after {settings.get('warmup_s')} s warm-up; "
            f"concurrency {settings.get('concurrency_levels')} "
            f"at batch {settings.get('batch_size_throughput')}",
        ),
        (
            "rounds",
            f"{settings.get('rounds', 1)} interleaved round(s) per figure, "
            f"{float(settings.get('confidence') or 0.95):.0%} intervals",
        ),
        ("status", report.status),
    ]
    section = Section(
        kind="compare",
        title=f"Engines for {report.name}",
        source=source,
        facts=facts,
        tables=[
            compare_table(report),
            *precision_tables([(e.label, e.accuracy) for e in report.engines if e.accuracy]),
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


def precision_tables(entries: list[tuple[str, dict[str, Any]]]) -> list[TableData]:
    """The accuracy table of reduced variants, then each mixed-precision search: ``(label, report)`` each."""
    if not entries:
        return []
    tables = [accuracy_table(entries)]
    for label, report in entries:
        mixed = report.get("auto_mixed_precision")
        if isinstance(mixed, dict):
            tables.append(mixed_precision_table(label, mixed))
    return tables


def convert_section(document: dict[str, Any], source: str) -> Section:
    """Verification of every model directory a conversion wrote, and the drift of reduced variants."""
    outcomes = document.get("outcomes") or []
    settings = document.get("precision_settings") or {}
    facts = [
        ("source", str(document.get("source"))),
        ("signature", str(document.get("signature"))),
        ("repository", f"{document.get('repo')} (target {document.get('target')})"),
    ]
    if settings.get("calibration_data"):
        facts.append(
            ("calibration", f"{settings['calibration_data']} ({settings.get('calibration_method')})")
        )
    entries = [(str(o["label"]), o["precision"]) for o in outcomes if isinstance(o.get("precision"), dict)]
    section = Section(
        kind="convert",
        title=f"Conversion of {document.get('name')}",
        source=source,
        facts=facts,
        tables=[verification_table(outcomes), *precision_tables(entries)],
    )
    section.warnings += [
        f"{o['label']} {o['status']}: {o['reason']}"
        for o in outcomes
        if o.get("status") in ("failed", "kept")
    ]
    return section


def section_for(document: dict[str, Any], source: str) -> Section:
    """The section of one document, by its schema."""
    schema = document.get("schema")
    if schema == CONVERT_SCHEMA:
        return convert_section(document, source)
    if schema == LOADTEST_SCHEMA:
        return loadtest_section(document, source)
    if schema in TUNE_SCHEMAS:
        return tune_section(document, source)
    return compare_section(document, source)


def render_report(documents: list[tuple[str, dict[str, Any]]], templates_dir: Path | None = None) -> str:
    """The HTML page of ``documents`` ((source name, document) each), in the order given."""
    from tritongen.triton.templates import render_template

    sections = [section_for(document, source) for source, document in documents]
    return render_template(
        REPORT_TEMPLATE,
        templates_dir,
        sections=sections,
        generated=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        version=__version__,
    )


def write_report(paths: list[Path], output: Path, templates_dir: Path | None = None) -> Path:
    """Read result JSON files and write their report page to ``output`` (atomically).

    Raises:
        ConfigError: an input is missing or not a tritongen result.
        RepositoryError: ``output`` cannot be written.
    """
    documents = [(path.name, read_document(path)) for path in paths]
    return write_documents(documents, output, templates_dir)


def write_documents(
    documents: list[tuple[str, dict[str, Any]]], output: Path, templates_dir: Path | None = None
) -> Path:
    """Write the report page of in-memory documents to ``output`` (atomically)."""
    return write_output(output, render_report(documents, templates_dir))
