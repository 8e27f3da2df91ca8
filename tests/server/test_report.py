"""``tritongen report`` and ``--html``: one self-contained page, checked in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.compare.result import CompareReport
from tritongen.loadtest.result import LoadTestReport
from tritongen.report.documents import read_result, result_from_json
from tritongen.server.local import LocalTritonServer
from tritongen.tune.document import TuneDocument

from support.loads import QUICK_RUNS

pytestmark = pytest.mark.slow
runner = CliRunner()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def results(
    triton_server: LocalTritonServer,
    served_repository: Path,
    example_models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Path]:
    """A real load test, tune and comparison of the example MLP, each with its JSON and --html page."""
    out = tmp_path_factory.mktemp("results")
    url = ["--url", triton_server.http_url]
    code, _, stderr = _run(
        "loadtest", "mlp_onnx", *url, "--metrics-url", triton_server.metrics_url, "--concurrency", "1,4",
        *QUICK_RUNS, "--json", out / "loadtest.json",
        "--html", out / "loadtest.html",
    )  # fmt: skip
    assert code == 0, stderr
    code, _, stderr = _run(
        "tune", "mlp_onnx", "--repo", served_repository, *url, "--strategy", "grid",
        "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,500", "--instances", "1",
        *QUICK_RUNS, "--concurrency", "4", "--slo-p99-ms", "1000", "--out", out / "tune",
        "--json", out / "tune.json",
        "--html", out / "tune.html", "--rounds", "2", "--finalists", "1",
    )  # fmt: skip
    assert code == 0, stderr
    code, _, stderr = _run(
        "compare", example_models["mlp"], "--name", "mlp", *url, "--metrics-url", triton_server.metrics_url,
        "--repo", served_repository, "--formats", "onnx", *QUICK_RUNS, "--rounds", "2",
        "--concurrency", "1,2", "--out", out / "compare", "--json", out / "compare.json",
        "--html", out / "compare.html",
    )  # fmt: skip
    assert code == 0, stderr
    return {kind: out / f"{kind}.json" for kind in ("loadtest", "tune", "compare")}


class Page:
    """A page opened in headless Chromium: what it shows and what it asked the network for."""

    def __init__(self, page: Any, requests: list[str]) -> None:
        self.page = page
        self.requests = requests

    def evaluate(self, script: str) -> Any:
        return self.page.evaluate(script)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("TRITONGEN_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (TRITONGEN_REQUIRE_BROWSER) but not installed")
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _open(browser: Any, path: Path, screenshot: Path | None = None) -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.resolve().as_uri(), wait_until="load")
    if screenshot is not None:
        page.screenshot(path=str(screenshot), full_page=True)
    return Page(page, requests)


IMAGES = "() => Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
TABLES = """() => Array.from(document.querySelectorAll('table')).map(t => ({
    caption: t.caption ? t.caption.innerText : '',
    headers: Array.from(t.querySelectorAll('thead th')).map(th => th.innerText),
    rows: t.querySelectorAll('tbody tr').length,
    visible: t.getBoundingClientRect().height > 0,
}))"""


def test_report_renders_every_result_as_tables_and_images(
    results: dict[str, Path], browser: Any, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    code, stdout, stderr = _run("report", results["loadtest"], results["tune"], results["compare"], "-o", out)
    assert code == 0, stderr
    assert "wrote" in stdout
    page = _open(browser, out, tmp_path / "report.png")
    # Self-contained: the browser fetched nothing but the page itself.
    assert page.requests == [out.resolve().as_uri()]
    tables = page.evaluate(TABLES)
    assert [t["caption"].split(":")[0].split(" over ")[0] for t in tables] == ["mlp_onnx", "mlp_onnx", "mlp"]
    assert all(t["visible"] and t["rows"] >= 1 for t in tables)
    loadtest_doc = json.loads(results["loadtest"].read_text())
    assert tables[0]["rows"] == len(loadtest_doc["runs"]) and "P99" in tables[0]["headers"]
    tune_doc = json.loads(results["tune"].read_text())
    assert tables[1]["rows"] == len(tune_doc["trials"]) + 1  # the baseline first
    assert "engine" in tables[2]["headers"] and "max abs err" in tables[2]["headers"]
    images = page.evaluate(IMAGES)
    assert len(images) == 4  # latency curve, tuning front, engine bars, engine curves
    assert all(complete and width > 300 and height > 150 for complete, width, height in images)
    text = page.evaluate("() => document.body.innerText")
    assert "Recommendations" in text and "latency-bound online serving" in text
    assert len(page.evaluate("() => Array.from(document.querySelectorAll('nav li'))")) == 3
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_html_option_of_each_command_writes_a_page_that_renders(
    results: dict[str, Path], browser: Any
) -> None:
    for kind, images in (("loadtest", 1), ("tune", 1), ("compare", 2)):
        path = results[kind].with_suffix(".html")
        page = _open(browser, path)
        assert page.requests == [path.resolve().as_uri()]
        assert len(page.evaluate(TABLES)) == 1
        loaded = page.evaluate(IMAGES)
        assert len(loaded) == images and all(c and w > 0 for c, w, _ in loaded), kind


def test_report_escapes_what_it_shows(results: dict[str, Path], browser: Any, tmp_path: Path) -> None:
    doc = json.loads(results["compare"].read_text())
    doc["engines"][0]["reason"] = "<script>document.title='owned'</script>"
    doc["engines"][0]["status"] = "failed"
    doc["name"] = "<b>m</b>"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(doc))
    out = tmp_path / "hostile.html"
    assert _run("report", hostile, "-o", out)[0] == 0
    page = _open(browser, out)
    assert page.evaluate("() => document.title") != "owned"
    assert page.evaluate("() => document.querySelectorAll('script').length") == 0
    text = page.evaluate("() => document.body.innerText")
    assert "<script>document.title='owned'</script>" in text and "Engines for <b>m</b>" in text


def test_report_refuses_what_is_not_a_result(results: dict[str, Path], tmp_path: Path) -> None:
    def error(*args: str | Path) -> str:
        code, _, stderr = _run("report", *args)
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), stderr
        return lines[0]

    assert "does not exist" in error(tmp_path / "missing.json", "-o", tmp_path / "r.html")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "is not a JSON document" in error(text, "-o", tmp_path / "r.html")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something/1"}))
    assert "is not a tritongen result" in error(other, "-o", tmp_path / "r.html")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "cannot write" in error(results["loadtest"], "-o", blocker / "r.html")
    assert not (tmp_path / "r.html").exists()
    broken = json.loads(results["tune"].read_text())
    del broken["trials"][0]["key"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    assert "document that cannot be read" in error(tmp_path / "broken.json", "-o", tmp_path / "r.html")


def test_each_result_reads_into_its_typed_report_and_back_unchanged(results: dict[str, Path]) -> None:
    for kind, typed in (("loadtest", LoadTestReport), ("tune", TuneDocument), ("compare", CompareReport)):
        document = json.loads(results[kind].read_text())
        report = read_result(results[kind])
        assert isinstance(report, typed)
        assert json.dumps(report.to_json()) == json.dumps(document), kind
        assert result_from_json(report.to_json()) == report, kind
