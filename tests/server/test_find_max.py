"""``loadtest --find-max`` on the real server: a one-instance 12 ms model's most load within a P99.

``sleep_const`` serves one request at a time: at concurrency c each request waits for the c - 1
ahead of it, so its P99 is about c × 12 ms. Within 30 ms that allows 2 and not 3: the search
must double 1, 2, 4, then bisect to the bracket [2, 3). A cap still within the SLO is a lower
bound; a first level that misses it fails the test in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line

pytestmark = pytest.mark.slow
runner = CliRunner()
QUICK = ["--duration", "1.5s", "--warmup", "0.3s", "--window", "0.25s", "--max-duration", "1.5s"]


def _search(server: LocalTritonServer, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "find.json"
    result = runner.invoke(
        app,
        ["loadtest", "sleep_const", "--url", server.http_url, "--metrics-url", server.metrics_url,
         "--concurrency", "1", "--find-max", *QUICK, "--json", str(out), *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    document = json.loads(out.read_text()) if out.exists() else {}
    return result.exit_code, document, result.stdout + result.stderr


@pytest.mark.quiet  # a P99 4 ms inside the limit at the bracket's low end: measured alone
def test_the_search_brackets_the_most_load_within_the_p99(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    code, document, output = _search(triton_server, tmp_path, "--slo-p99-ms", "30")
    assert code == 0, output
    found = document["find_max"]
    assert (found["meets"], found["misses"], found["capped"]) == (2, 3, False), found
    assert [level for level, _ in found["levels"][:3]] == [1, 2, 4]  # doubling, then bisecting
    assert [run["concurrency"] for run in document["runs"]] == [level for level, _ in found["levels"]]
    assert 60 <= found["throughput_at_meets"] <= 90  # one request per 12 ms and a little
    assert "Most load within P99 ≤ 30 ms: between 2" in output


def test_a_cap_within_the_slo_is_a_lower_bound(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    code, document, output = _search(triton_server, tmp_path, "--slo-p99-ms", "1000", "--max-level", "2")
    assert code == 0, output
    found = document["find_max"]
    assert (found["meets"], found["misses"], found["capped"]) == (2, None, True)
    assert "at least 2" in output


def test_a_first_level_that_misses_fails_in_one_line(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    code, document, output = _search(triton_server, tmp_path, "--slo-p99-ms", "5")
    assert code != 0
    assert document["find_max"]["meets"] is None and len(document["runs"]) == 1
    said = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(said) == 1 and "the first level, 1, missed it" in said[0], output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--slo-p99-ms", "30", "--concurrency", "1,2"], "--find-max chooses its own levels"),
        ([], "none was given"),
        (["--slo-p99-ms", "30", "--search-precision", "2"], "--search-precision 2 is not between 0 and 1"),
    ],
)
def test_a_search_that_cannot_run_is_refused(
    triton_server: LocalTritonServer, tmp_path: Path, args: list[str], said: str
) -> None:
    code, document, output = _search(triton_server, tmp_path, *args)
    assert code != 0 and not document
    assert said in error_line(output), output


def test_max_level_without_find_max_is_refused(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["loadtest", "sleep_const", "--url", triton_server.http_url, "--max-level", "8"]
    )
    assert result.exit_code != 0
    assert "--max-level applies with --find-max" in error_line(result.stdout + result.stderr)
