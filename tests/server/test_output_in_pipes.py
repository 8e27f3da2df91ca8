"""Piped output keeps every word: ``compare`` and ``tune`` on the real server, stdout and stderr pipes.

Each command's output is read at ``COLUMNS=80``, ``200`` and unset (the pipe default): every
word of the texts its result JSON holds (recommendations, notes, the verdict) appears whole,
and its table is drawn with every cell complete, one line a row at 200 columns. The compare
is measured once (the cheapest real run) and its report printed again at the other widths by
the command's own printing function, as no command prints it from a file; the tune runs at
each width, the last one a ``--resume`` that only prints what the one before measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritongen.compare.result import CompareReport
from tritongen.report.compare_tables import compare_table
from tritongen.report.tune_tables import tune_table
from tritongen.server.local import LocalTritonServer
from tritongen.tune.document import TuneDocument

from support.piped_output import WIDTHS, assert_table_whole, assert_whole, run_piped

QUICK = ["--duration", "0.5s", "--warmup", "0s", "--window", "0.25s", "--max-duration", "0.5s",
         "--rounds", "1"]  # fmt: skip
PRINT_REPORT = (
    "import json, sys; from tritongen.cli.commands.compare import print_report; "
    "from tritongen.compare.result import CompareReport; "
    "print_report(CompareReport.from_json(json.loads(open(sys.argv[1]).read())))"
)


def _check_compare(stdout: str, document: dict[str, object], columns: str | None) -> None:
    report = CompareReport.from_json(document)  # type: ignore[arg-type]
    table = compare_table(report)
    assert_table_whole(table, stdout, one_line_rows=columns == "200")
    for note in table.notes:
        assert_whole(note, stdout)
    assert report.recommendations
    for rec in report.recommendations:
        assert_whole(f"{rec.title}: {rec.reason}", stdout)


def test_compare_recommendations_and_table_are_whole_in_a_pipe(
    triton_server: LocalTritonServer, served_repository: Path, example_models: dict[str, Path], tmp_path: Path
) -> None:
    result = tmp_path / "compare.json"
    piped = run_piped(
        ["compare", example_models["mlp"], "--name", "mlp", "--formats", "onnx",
         "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url,
         "--repo", served_repository, "--concurrency", "1", *QUICK,
         "--out", tmp_path / "work", "--json", result],
        columns="80",
    )  # fmt: skip
    assert piped.code == 0, piped.stderr
    document = json.loads(result.read_text())
    _check_compare(piped.stdout, document, "80")
    assert_whole(f"results: {tmp_path / 'work' / 'compare.json'}, {result}", piped.stdout)
    for columns in WIDTHS[1:]:
        again = run_piped(["-c", PRINT_REPORT, result], columns=columns)
        assert again.code == 0, again.stderr
        _check_compare(again.stdout, document, columns)


GRID = ["--strategy", "grid", "--max-batch-size", "32", "--max-queue-delay-us", "{delay}", "--instances", "1",
        "--preferred-batch-sizes", "{sizes}"]  # fmt: skip
CONFIRMED = [a.format(delay=100, sizes="auto") for a in GRID]
"""One config besides the current one: searched, then confirmed against it in a round."""
CURRENT = [a.format(delay=500, sizes="4,8,16") for a in GRID]
"""Only the current config (mlp_onnx's committed batching): searched, nothing to confirm."""


def test_tune_table_and_verdict_are_whole_in_a_pipe(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    common = ["tune", "mlp_onnx", "--repo", served_repository, "--url", triton_server.http_url, *QUICK,
              "--concurrency", "4", "--finalists", "1", "--slo-p99-ms", "500"]  # fmt: skip
    runs = [
        ("80", [*CONFIRMED, "--out", tmp_path / "confirmed"]),  # the widest table, at the narrowest width
        ("200", [*CURRENT, "--out", tmp_path / "current"]),
        (None, [*CURRENT, "--resume", tmp_path / "current"]),  # prints the finished tune, measures nothing
    ]
    for columns, args in runs:
        result = tmp_path / f"tune-{columns}.json"
        piped = run_piped([*common, *args, "--json", result], columns=columns)
        assert piped.code == 0, piped.stderr
        document = json.loads(result.read_text())
        assert_table_whole(
            tune_table(TuneDocument.from_json(document)), piped.stdout, one_line_rows=columns == "200"
        )
        assert_whole(str(document["verdict"]), piped.stdout)
        for trial in document["trials"]:  # each trial's line on stderr, its key whole
            assert f"{trial['key']}:" in piped.stderr.split(), piped.stderr
