"""Console output in pipes and at any width: tables keep every word, free text prints whole.

The rule (``tritongen/cli/console.py``): not a terminal → ``COLUMNS`` or 120 columns, text
unwrapped, table cells wrapping at spaces and never cut; a table whose longest words do
not fit is printed wider than the width. In a terminal rich decides the width as before.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from tritongen.cli.console import PIPE_WIDTH, pipe_width
from tritongen.compare.result import CompareReport, EngineResult
from tritongen.compare.runner import finish
from tritongen.report.compare_tables import compare_table
from tritongen.report.table_data import TableData, to_rich
from tritongen.report.table_layout import WholeWordTable, spread

from support.piped_output import WIDTHS, assert_table_whole, assert_whole, drawn_tables, run_piped

WIDE_TABLE = TableData(
    title="mlp_onnx over grpc (127.0.0.1:8001), latency in ms, with a title longer than narrow widths",
    headers=("level", "config", "req/s", "infer/s", "P99.9", "queue µs", "vs current", "drift vs FP32"),
    rows=[
        ("c=1", "current-mb32-pb4.8.16-qd500-i1", "1,234", "39,488", "12.34", "–", "baseline", "–"),
        ("c=32", "mb32-pbauto-qd100-i2", "117,152", "3,748,864", "0.97", "1,234",
         "1.11× [1.02, 1.21] (one round, no interval)", "rel RMS 2.3e-04 (top-1 agreement 99.8%)"),
    ],
    right=(True, False, True, True, True, True, False, False),
)  # fmt: skip


def _render(renderable: object, width: int, *, soft_wrap: bool) -> str:
    out = io.StringIO()
    Console(file=out, width=width, soft_wrap=soft_wrap, color_system=None).print(renderable)
    return out.getvalue()


def test_spread_gives_every_column_its_longest_word_and_the_rest_to_what_needs_little() -> None:
    assert spread([3, 5, 20], [3, 10, 60], 200) == [3, 10, 60]  # everything fits: one line each
    assert spread([3, 5, 20], [3, 10, 60], 10) == [3, 5, 20]  # not even the words: the words
    widths = spread([3, 5, 20], [3, 10, 60], 40)
    assert sum(widths) == 40 and widths[:2] == [3, 10]  # the short column fits whole first
    assert all(lo <= w <= hi for lo, w, hi in zip([3, 5, 20], widths, [3, 10, 60], strict=True))
    assert spread([1, 1, 1], [9, 9, 9], 10) in ([4, 3, 3], [3, 4, 3], [3, 3, 4])


@pytest.mark.parametrize("soft_wrap", [True, False], ids=["pipe", "terminal"])
def test_a_table_keeps_every_word_at_every_width_it_can(soft_wrap: bool) -> None:
    narrowest = max(len(line) for line in _render(to_rich(WIDE_TABLE), 1, soft_wrap=True).splitlines())
    for width in (*range(narrowest, 200, 7), 200, 240):
        shown = _render(to_rich(WIDE_TABLE), width, soft_wrap=soft_wrap)
        assert_table_whole(WIDE_TABLE, shown, one_line_rows=width >= 240)
        assert max(len(line) for line in shown.splitlines()) <= width
    for width in (20, 40, narrowest - 1):  # the longest words do not fit
        shown = _render(to_rich(WIDE_TABLE), width, soft_wrap=soft_wrap)
        if soft_wrap:  # printed in full, wider than the width
            assert_table_whole(WIDE_TABLE, shown)
        else:  # a terminal crops its lines: rich's own layout, as before
            assert max(len(line) for line in shown.splitlines()) <= width


def test_tables_built_in_the_commands_are_laid_out_the_same_way() -> None:
    table = Table(title="verification against the source")
    for header in ("format", "tolerance", "time s"):
        table.add_column(header, no_wrap=header == "time s")
    table.add_row("ONNX Runtime (CPUExecutionProvider)", "1e-04 + 1e-03·|ref|", "12.5")
    shown = _render(WholeWordTable(table), 30, soft_wrap=True)
    drawn = drawn_tables(shown)[0]
    assert drawn.columns == ["ONNX Runtime (CPUExecutionProvider)", "1e-04 + 1e-03·|ref|", "12.5"]


def test_the_consoles_in_a_pipe_take_columns_or_a_wide_default() -> None:
    assert pipe_width({"COLUMNS": "80"}) == 80
    assert pipe_width({}) == pipe_width({"COLUMNS": "wide"}) == pipe_width({"COLUMNS": "0"}) == PIPE_WIDTH
    script = (
        "from tritongen.cli.console import console, err_console; "
        "print(console.width, console.soft_wrap, err_console.width, err_console.soft_wrap)"
    )
    for columns, width in (("80", 80), ("200", 200), (None, PIPE_WIDTH)):
        piped = run_piped(["-c", script], columns=columns)
        assert piped.stdout.split() == [str(width), "True", str(width), "True"], piped.stderr


def _engine(fmt: str, p99: float, qps: float, mem_mb: float, shift: int, build: str) -> EngineResult:
    """An engine measured in three noisy rounds (``shift`` orders them): a tie, so the reasons are long."""
    spread_ = (-1.0, 0.0, 1.0)[shift:] + (-1.0, 0.0, 1.0)[:shift]
    engine = EngineResult(
        format=fmt, model=f"mlp_{fmt}", p99_ms_b1=p99, infer_per_s_b32=qps, peak_mem_bytes=int(mem_mb * 1e6),
        precision="fp32", rounds=3, build=build, status="ok",
        round_figures={"p99_ms_b1": [p99 * math.exp(0.3 * z) for z in spread_],
                       "infer_per_s_b32": [qps * math.exp(0.3 * z) for z in reversed(spread_)]},
    )  # fmt: skip
    engine.summarise(0.95)
    return engine


def test_compare_recommendations_are_whole_in_a_pipe(tmp_path: Path) -> None:
    """The case ``make demo`` cut ("…throughput does not separ"): two engines within the noise."""
    report = CompareReport(
        source="mlp.onnx", name="mlp", hardware={},
        settings={"rank_by": "throughput", "batch_size_throughput": 32, "confidence": 0.95},
        engines=[_engine("onnx", 2.0, 1000.0, 70.0, 0, build="CPUExecutionProvider, 2 intra-op threads"),
                 _engine("tvm", 2.05, 1010.0, 72.0, 1, build="llvm -mcpu=znver3, MetaSchedule 1 min")],
    )  # fmt: skip
    finish(report, "throughput")
    assert any("does not separate them either" in r.reason for r in report.recommendations)
    path = tmp_path / "compare.json"
    path.write_text(json.dumps(report.to_json()))
    script = (
        "import json, sys; from tritongen.cli.commands.compare import print_report; "
        "from tritongen.compare.result import CompareReport; "
        "print_report(CompareReport.from_json(json.loads(open(sys.argv[1]).read())))"
    )
    for columns in WIDTHS:
        piped = run_piped(["-c", script, path], columns=columns)
        assert piped.code == 0, piped.stderr
        assert_table_whole(compare_table(report), piped.stdout, one_line_rows=columns == "200")
        for rec in report.recommendations:
            assert_whole(f"{rec.title}: {rec.reason}", piped.stdout)
