"""Requests that fail, named with their cause, on the real server.

A model that raises: ``loadtest`` ends at once with one line quoting the server's message and
the count of failed requests (no table of dashes), the JSON keeps each kind's first message;
``infer`` says the server's message. A model that never answers: both name it within their
``--timeout`` while the server is up (never "cannot reach Triton"). A load process whose user
raises ends the run at once with its one-line cause.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritongen.client.repository import RepositoryControl
from tritongen.loadtest.locust_process import load_generator_files
from tritongen.server.local import LocalTritonServer

from support.failing_models import HUNG_MODEL, RAISING_MODEL, write_hung_model, write_raising_model
from support.processes import start_cli

pytestmark = pytest.mark.slow
SHORT = ["--duration", "2s", "--warmup", "1s", "--window", "0.5s"]


@pytest.fixture
def raising_model(triton_server: LocalTritonServer, served_repository: Path) -> Iterator[str]:
    write_raising_model(served_repository)
    control = RepositoryControl(triton_server.http_url)
    control.load(RAISING_MODEL)
    try:
        yield RAISING_MODEL
    finally:
        control.unload(RAISING_MODEL)
        control.close()


@pytest.fixture
def hung_model(triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path) -> Iterator[str]:
    release = tmp_path / "release"
    write_hung_model(served_repository, release)
    control = RepositoryControl(triton_server.http_url)
    control.load(HUNG_MODEL)
    try:
        yield HUNG_MODEL
    finally:
        release.touch()  # the requests still held in it are answered, and it unloads
        control.unload(HUNG_MODEL)
        control.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_load_whose_requests_all_fail_ends_with_the_servers_message(
    triton_server: LocalTritonServer, raising_model: str, tmp_path: Path, protocol: str
) -> None:
    url = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    out = tmp_path / "run.json"
    started = time.monotonic()
    cli = start_cli(
        tmp_path / "cli", "loadtest", raising_model, "--url", url, "--protocol", protocol,
        "--concurrency", "2", *SHORT, "--json", out,
    )  # fmt: skip
    try:
        code = cli.wait(120)
    finally:
        cli.kill()
    took = time.monotonic() - started
    assert code == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert "every request failed (" in line and "NameError" in line and "undefined_on_purpose" in line, line
    assert "\n" not in line and len(line) < 600, line
    assert "req/s" not in cli.stdout(), cli.stdout()  # no table of dashes
    assert "not stable" not in cli.stderr() and "max-error-rate" not in line
    assert took < 45, took  # at the end of its warm-up, not after --max-duration
    (run,) = json.loads(out.read_text())["runs"]
    assert run["status"] == "aborted" and run["reason"] in line
    assert run["requests"] >= 1 and run["errors"] == run["requests"], run  # the failures it ended on
    (kind,) = run["error_messages"]
    assert kind == ("http_500" if protocol == "http" else "grpc_internal")
    assert "NameError" in run["error_messages"][kind]


def test_infer_says_the_servers_message(
    triton_server: LocalTritonServer, raising_model: str, tmp_path: Path
) -> None:
    cli = start_cli(tmp_path / "cli", "infer", raising_model, "--url", triton_server.http_url)
    assert cli.wait(60) == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert "NameError" in line and "cannot reach" not in line, line


def test_a_model_that_never_answers_is_named_within_the_timeout(
    triton_server: LocalTritonServer, hung_model: str, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    started = time.monotonic()
    cli = start_cli(
        tmp_path / "cli", "loadtest", hung_model, "--url", triton_server.http_url, "--concurrency", "2",
        *SHORT, "--timeout", "3s", "--json", out,
    )  # fmt: skip
    try:
        code = cli.wait(90)
    finally:
        cli.kill()
    took = time.monotonic() - started
    assert code == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert f"model '{hung_model}' did not answer within --request-timeout 3 s" in line, line
    assert "server is live" in line and "cannot reach" not in line and "Locust ended" not in line
    assert took < 25, took  # the timeout, the CLI's and Locust's start: not a minute
    assert json.loads(out.read_text())["runs"][0]["status"] == "aborted"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_names_a_model_that_never_answers(
    triton_server: LocalTritonServer, hung_model: str, tmp_path: Path, protocol: str
) -> None:
    url = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    started = time.monotonic()
    cli = start_cli(
        tmp_path / "cli", "infer", hung_model, "--url", url, "--protocol", protocol, "--timeout", "2s"
    )
    try:
        code = cli.wait(60)
    finally:
        cli.kill()
    assert code == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert f"model '{hung_model}' did not answer within 2 s, while the server is live" in line, line
    assert "cannot reach" not in line and "--timeout" in line
    assert time.monotonic() - started < 30


def test_a_user_that_raises_ends_the_run_at_once_with_its_cause(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    """The load generator as shipped, but its users' load raises mid-run (a fault of its own)."""
    folder = tmp_path / "loadgen"
    for name, text in load_generator_files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    loops = folder / "tritonload" / "loops.py"
    marker = '"""Send until Locust stops the user."""\n        process, options = self.process, self.options'
    assert marker in loops.read_text()
    loops.write_text(loops.read_text().replace(marker, marker + '\n        raise KeyError("injected fault")'))
    log = tmp_path / "locust.log"
    started = time.monotonic()
    with log.open("wb") as out:
        locust = subprocess.Popen(
            [str(Path(sys.executable).with_name("locust")), "-f", str(folder / "locustfile.py"), "--headless",
             "-u", "2", "-r", "2", "--run-time", "60s", "--host", triton_server.http_url,
             "--triton-model", "mlp_onnx", "--triton-metrics-url", "none", "--loglevel", "WARNING"],
            stdout=out, stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip
    try:
        code = locust.wait(timeout=60)
    finally:
        locust.kill()
        locust.wait(timeout=10)
    failures = [line for line in log.read_text().splitlines() if line.startswith("tritongen worker: ")]
    assert code == 3, log.read_text()[-3000:]
    assert failures[0] == "tritongen worker: a user failed: KeyError: 'injected fault'", failures
    assert time.monotonic() - started < 30  # at once, not at its 60 s run time
