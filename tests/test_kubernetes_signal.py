"""The scaling signal is real: a real Prometheus scrapes the embedded Triton and evaluates the rules.

The recording rules hold the very expressions of the written prometheus-adapter rule (its
template filled in as the adapter does) and of the KEDA trigger, for both signals. Under a
load above the model's capacity each signal rises above the target its autoscaler was
written with; once the load stops it falls below it again.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from processes import start_cli

from tritongen.deploy.kubernetes.scaling import (
    SIGNALS,
    ScalingSignal,
    adapter_query,
    adapter_rules,
    keda_query,
    scaling_target,
)
from tritongen.server.local import LocalTritonServer

pytestmark = [pytest.mark.triton, pytest.mark.slow]

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
if not (PROMETHEUS and PROMTOOL):
    if os.environ.get("TRITONGEN_REQUIRE_PROMETHEUS"):
        raise RuntimeError("Prometheus is required here: run `make prometheus`")
    pytest.skip("Prometheus is not installed (`make prometheus` installs Debian's)", allow_module_level=True)

NAMESPACE, POD = "tritongen", "triton-0"
# The labels the PodMonitor's scrape gives each series in a cluster.
LABELS = f'namespace="{NAMESPACE}",pod="{POD}"'
WINDOW = "10s"
# One instance answering in 12 ms; 8 requests in flight queue about 7 × 12 ms each.
MODEL, CONCURRENCY = "sleep_const", 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    url: str

    def value(self, record: str) -> float | None:
        query = urllib.parse.urlencode({"query": record})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        result = body["data"]["result"]
        return float(result[0]["value"][1]) if result else None


def _rules(signal: ScalingSignal) -> list[dict[str, str]]:
    """Recording rules holding the adapter's and KEDA's queries for ``signal``, as written."""
    rule = adapter_rules(signal, WINDOW)["rules"][0]
    keda = keda_query(signal, f'namespace="{NAMESPACE}",pod=~"triton-.*"', WINDOW)
    return [
        {"record": f"adapter:{signal.metric}", "expr": adapter_query(rule, LABELS, "pod")},
        {"record": f"keda:{signal.metric}", "expr": keda},
    ]


@pytest.fixture(scope="module")
def prometheus(
    triton_server: LocalTritonServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    rules = work / "rules.yaml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "tritongen", "interval": "1s",
                                    "rules": [r for s in SIGNALS.values() for r in _rules(s)]}]})
    )  # fmt: skip
    config = work / "prometheus.yaml"
    target = f"127.0.0.1:{triton_server.metrics_port}"
    config.write_text(
        yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "triton", "static_configs": [
                {"targets": [target], "labels": {"namespace": NAMESPACE, "pod": POD}}]}],
        })
    )  # fmt: skip
    # promtool parses every expression the way the server will.
    check = subprocess.run([PROMTOOL, "check", "config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = _free_port()
    log = (work / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (work / "prometheus.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "Prometheus did not get ready in 30 s"
                time.sleep(0.2)
        yield Prometheus(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _records() -> list[tuple[str, ScalingSignal]]:
    return [(f"{side}:{s.metric}", s) for s in SIGNALS.values() for side in ("adapter", "keda")]


def test_signal_rises_above_the_target_under_overload_and_falls_once_it_stops(
    prometheus: Prometheus, triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    targets = {s.name: scaling_target(s, None).value for s in SIGNALS.values()}
    load = start_cli(
        tmp_path, "loadtest", MODEL, "--url", triton_server.http_url, "--concurrency", str(CONCURRENCY),
        "--duration", "20s", "--warmup", "0s", "--processes", "1",
    )  # fmt: skip
    peaks: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 60
        while len(peaks) < len(_records()) or any(peaks[r] <= targets[s.name] for r, s in _records()):
            assert load.process.poll() is None, f"load ended early: {peaks}\n{load.stderr()}"
            assert time.monotonic() < deadline, f"signals stayed at or below their targets {targets}: {peaks}"
            for record, _ in _records():
                value = prometheus.value(record)
                if value is not None:
                    peaks[record] = max(peaks.get(record, 0.0), value)
            time.sleep(0.5)
    finally:
        load.kill()
    # Both readings of one signal are one expression over the same series.
    for signal in SIGNALS.values():
        assert peaks[f"adapter:{signal.metric}"] > targets[signal.name]
    # Idle: once the window holds no traffic the signal is 0, not 0/0.
    deadline = time.monotonic() + 60
    latest: dict[str, float | None] = {}
    while True:
        latest = {record: prometheus.value(record) for record, _ in _records()}
        # A NaN (0/0) would never compare below the target: idle must read 0.
        if all(v is not None and v < targets[s.name] for (r, s) in _records() for v in [latest[r]]):
            break
        assert time.monotonic() < deadline, f"signals did not fall below {targets} within 60 s: {latest}"
        time.sleep(1)
