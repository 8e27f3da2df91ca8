"""Result documents read into their typed reports and written back unchanged; the report reads each once.

``data/results/`` holds documents written by the load tests, tunes, comparisons and
conversions of the server tier and of the convert command (load tests with rounds, a mix,
streams, sequences, an ensemble's models, an LLM, responses checked, a stopped sweep;
comparisons with precision reports and ``--rounds auto``; tunes with a confirmation, its
stopping record and a background load; conversions with calibration, a mixed-precision
search and a kept failure).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritongen.compare.result import CompareReport
from tritongen.errors import ConfigError
from tritongen.loadtest.result import LoadTestReport
from tritongen.pipeline.document import ConvertDocument
from tritongen.report.documents import read_result, result_from_json
from tritongen.report.html import render_report
from tritongen.tune.document import TuneDocument

RESULTS = Path(__file__).parent / "data" / "results"
DOCUMENTS = sorted(RESULTS.glob("*.json"))
KINDS = {
    "loadtest": LoadTestReport,
    "compare": CompareReport,
    "tune": TuneDocument,
    "convert": ConvertDocument,
}


def _document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_every_kind_of_result_has_documents() -> None:
    assert {path.name.split("-")[0] for path in DOCUMENTS} == set(KINDS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.stem)
def test_a_document_read_and_written_back_is_the_same_document(path: Path) -> None:
    document = _document(path)
    report = read_result(path)
    assert isinstance(report, KINDS[path.name.split("-")[0]])
    again = report.to_json()
    assert again == document
    assert json.dumps(again) == json.dumps(document)  # the same keys in the same order


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.stem)
def test_a_report_written_and_read_back_is_the_same_report(path: Path) -> None:
    report = read_result(path)
    assert result_from_json(json.loads(json.dumps(report.to_json()))) == report


def test_the_typed_figures_are_those_of_the_document() -> None:
    loadtests = [read_result(p) for p in DOCUMENTS if p.name.startswith("loadtest")]
    runs = [run for report in loadtests if isinstance(report, LoadTestReport) for run in report.runs]
    mixed = next(run for run in runs if run.models)
    for name, part in mixed.model_parts().items():
        assert part.share == mixed.models[name]["share"]
        assert part.run.requests == mixed.models[name]["requests"]
        assert part.run.latency_us == mixed.models[name]["latency_us"]
    tree = next(run for run in runs if len(run.server_models) > 1)
    for name, figures in tree.server_model_figures().items():
        assert figures.parent == tree.server_models[name]["parent"]
        assert figures.queue_us == tree.server_models[name]["queue_us"]
    timed = next(run for run in runs if run.server_us)
    assert timed.server_times().queue_us == timed.server_us["queue"]


def test_a_page_is_drawn_from_every_document() -> None:
    page = render_report([(path.name, read_result(path)) for path in DOCUMENTS])
    assert all(path.name in page for path in DOCUMENTS)


def test_a_document_that_lacks_what_its_schema_requires_is_one_line_with_a_fix(tmp_path: Path) -> None:
    document = _document(next(p for p in DOCUMENTS if p.name.startswith("compare")))
    del document["engines"][0]["format"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tritongen\.compare/1 document that cannot be read") as caught:
        read_result(broken)
    assert "\n" not in caught.value.one_line() and caught.value.hint
