"""The locustfile runs from its folder alone, where tritongen is not installed (a plain Locust image).

A copy of ``loadtests/`` runs as ``locust -f loadtests/locustfile.py`` under this venv's Python
started with ``-S``: no site, so the editable install's ``.pth`` of tritongen is never read, and
``PYTHONPATH`` gives it the venv's packages (Locust, tritonclient, numpy, hdrhistogram,
prometheus_client, as the compose image adds them). The run goes against the real embedded
server; its report and windows are read by the package, as ``tritongen report`` reads them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.windows import WindowLog
from tritongen.server.local import LocalTritonServer

from support.paths import ROOT

MODEL = "mlp_onnx"


def _without_tritongen() -> tuple[list[str], dict[str, str]]:
    """This venv's Python without site (no ``.pth`` files) and the venv's packages on ``PYTHONPATH``."""
    packages = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join(packages)
    return [sys.executable, "-S"], env


def _folder_copy(tmp_path: Path) -> Path:
    """``loadtests/`` copied elsewhere, as a volume mounts it: the locustfile and its package only."""
    folder = tmp_path / "loadtests"
    shutil.copytree(ROOT / "loadtests", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _check_no_tritongen(tmp_path: Path) -> None:
    """The environment has what the compose image adds, and no tritongen."""
    python, env = _without_tritongen()
    image = "import locust, tritonclient.grpc, tritonclient.http, numpy, hdrh, prometheus_client"
    code = f"{image}\nimport tritongen"
    done = subprocess.run(
        [*python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1 and "No module named 'tritongen'" in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_headless_run_from_the_folder_alone(
    triton_server: LocalTritonServer, tmp_path: Path, protocol: str
) -> None:
    _check_no_tritongen(tmp_path)
    folder = _folder_copy(tmp_path)
    python, env = _without_tritongen()
    results, document = tmp_path / "windows.jsonl", tmp_path / "run.json"
    host = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    argv = [
        *python, "-m", "locust", "-f", str(folder.relative_to(tmp_path) / "locustfile.py"), "--headless",
        "-u", "2", "-r", "2", "--run-time", "2s", "--host", host, "--loglevel", "WARNING",
        "--triton-protocol", protocol, "--triton-results", str(results), "--triton-json", str(document),
        "--triton-metrics-url", triton_server.metrics_url,
    ]  # fmt: skip
    env["TRITONGEN_MODEL"] = MODEL  # every option also reads its environment variable
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    summary = [line for line in done.stdout.splitlines() if line.startswith("tritongen: ")]
    assert summary and " requests in " in summary[0] and "errors 0" in summary[0], done.stdout[-3000:]
    report = LoadTestReport.from_json(json.loads(document.read_text()))
    (run,) = report.runs
    assert (report.model, report.protocol, run.status, run.errors) == (MODEL, protocol, "ok", 0)
    assert run.requests > 0 and run.latency_us is not None and run.server_us is not None
    log = WindowLog(results)
    log.poll()
    assert sum(w.ok + w.error_count for w in log.windows.values()) == run.requests
