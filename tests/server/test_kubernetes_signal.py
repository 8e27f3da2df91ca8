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
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tritongen.deploy.kubernetes.scaling import SIGNALS, ScalingSignal, adapter_query, scaling_target
from tritongen.server.local import LocalTritonServer

from support.network import free_port
from support.paths import ROOT
from support.processes import start_cli

pytestmark = pytest.mark.slow

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
if not (PROMETHEUS and PROMTOOL):
    if os.environ.get("TRITONGEN_REQUIRE_PROMETHEUS"):
        raise RuntimeError("Prometheus is required here: run `make prometheus`")
    pytest.skip("Prometheus is not installed (`make prometheus` installs Debian's)", allow_module_level=True)


NAME, NAMESPACE, POD = "triton", "tritongen", "triton-5c9d7b6f4-x2x7q"
# The labels the PodMonitor's scrape gives each series in a cluster.
LABELS = f'namespace="{NAMESPACE}",pod="{POD}"'
WINDOW = "10s"
SCRAPE = "1s"
"""The scrape interval of the PodMonitor written, and of the Prometheus below."""
# One instance answering in 12 ms; 8 requests in flight queue about 7 × 12 ms each.
MODEL, CONCURRENCY = "sleep_const", 8


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


@dataclass(frozen=True)
class Written:
    """What `tritongen kubernetes` wrote for one signal: both autoscalers' queries and targets."""

    signal: ScalingSignal
    adapter_query: str
    hpa_target: float
    keda_query: str
    keda_threshold: float


def _quantity(text: str) -> float:
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _write(signal: ScalingSignal, autoscaler: str, out: Path) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "tritongen", "kubernetes", str(ROOT / "model_repository"), "-o", str(out),
         "--name", NAME, "--namespace", NAMESPACE, "--autoscaler", autoscaler, "--scale-on", signal.name,
         "--scale-window", WINDOW, "--scrape-interval", SCRAPE, "--no-validate"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _written(signal: ScalingSignal, work: Path) -> Written:
    hpa = _write(signal, "hpa", work / f"{signal.name}-hpa")
    keda = _write(signal, "keda", work / f"{signal.name}-keda")
    rule = yaml.safe_load((hpa / "prometheus-adapter-rules.yaml").read_text())["rules"][0]
    assert rule["name"]["as"] == signal.metric
    (metric,) = yaml.safe_load((hpa / "base" / "hpa.yaml").read_text())["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] == signal.metric
    (trigger,) = yaml.safe_load((keda / "base" / "scaledobject.yaml").read_text())["spec"]["triggers"]
    monitor = yaml.safe_load((hpa / "base" / "podmonitor.yaml").read_text())
    assert monitor["spec"]["podMetricsEndpoints"][0]["interval"] == SCRAPE
    return Written(
        signal=signal,
        # The adapter fills in the pods it is asked about and groups by pod.
        adapter_query=adapter_query(rule, LABELS, "pod"),
        hpa_target=_quantity(metric["pods"]["target"]["averageValue"]),
        keda_query=trigger["metadata"]["query"],
        keda_threshold=float(trigger["metadata"]["threshold"]),
    )


def _rules(written: Written) -> list[dict[str, str]]:
    """Recording rules holding the adapter's and KEDA's queries for one signal, as written."""
    metric = written.signal.metric
    return [
        {"record": f"adapter:{metric}", "expr": written.adapter_query},
        {"record": f"keda:{metric}", "expr": written.keda_query},
    ]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[Written]:
    work = tmp_path_factory.mktemp("manifests")
    return [_written(signal, work) for signal in SIGNALS.values()]


@pytest.fixture(scope="module")
def prometheus(
    triton_server: LocalTritonServer, written: list[Written], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    rules = work / "rules.yaml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "tritongen", "interval": "1s",
                                    "rules": [r for w in written for r in _rules(w)]}]})
    )  # fmt: skip
    config = work / "prometheus.yaml"
    target = f"127.0.0.1:{triton_server.metrics_port}"
    config.write_text(
        yaml.safe_dump({
            "global": {"scrape_interval": SCRAPE, "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "triton", "static_configs": [
                {"targets": [target], "labels": {"namespace": NAMESPACE, "pod": POD}}]}],
        })
    )  # fmt: skip
    # promtool parses every expression the way the server will.
    check = subprocess.run([PROMTOOL, "check", "config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
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


def _targets(written: list[Written]) -> dict[str, float]:
    """Each record and the target its autoscaler holds it at."""
    targets = {}
    for w in written:
        targets[f"adapter:{w.signal.metric}"] = w.hpa_target
        targets[f"keda:{w.signal.metric}"] = w.keda_threshold
    return targets


def test_signal_rises_above_the_target_under_overload_and_falls_once_it_stops(
    prometheus: Prometheus, written: list[Written], triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    targets = _targets(written)
    # The written targets are the documented defaults (no --from): both autoscalers agree.
    for w in written:
        assert w.hpa_target == w.keda_threshold == scaling_target(w.signal, None).value
    load = start_cli(
        tmp_path, "loadtest", MODEL, "--url", triton_server.http_url, "--concurrency", str(CONCURRENCY),
        "--duration", "30s", "--warmup", "0s", "--processes", "1",
    )  # fmt: skip
    peaks: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 60
        while len(peaks) < len(targets) or any(peaks[r] <= target for r, target in targets.items()):
            assert load.process.poll() is None, f"load ended early: {peaks}\n{load.stderr()}"
            assert time.monotonic() < deadline, f"signals stayed at or below their targets {targets}: {peaks}"
            for record in targets:
                value = prometheus.value(record)
                if value is not None:
                    peaks[record] = max(peaks.get(record, 0.0), value)
            time.sleep(0.5)
    finally:
        load.kill()
    # Idle: once the window holds no traffic each signal reads 0 (below any target), where a
    # plain ratio would read 0/0 = NaN and the autoscaler would see no value at all.
    deadline = time.monotonic() + 60
    while True:
        latest = {record: prometheus.value(record) for record in targets}
        if all(v == 0 for v in latest.values()):
            break
        assert time.monotonic() < deadline, f"signals did not fall to 0 within 60 s of the load: {latest}"
        time.sleep(1)
