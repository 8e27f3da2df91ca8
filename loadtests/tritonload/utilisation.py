"""The server's CPU and GPU utilisation and memory, sampled from Triton's metrics endpoint on the master.

The endpoint (``--triton-metrics-url``, default the Triton host's port 8002) is scraped every
second in a greenlet while the test runs; the report gives each figure's mean, peak and
peak memory. Several GPUs: utilisation averaged, memory summed. ``prometheus_client``'s
parser reads the text where it is installed, a tolerant one of its own where not.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import gevent

from .report import say
from .server_api import SERVER_TIMEOUT_S, failure_text, host_port
from .shared import SUMMED_FIGURES, UTILISATION_METRICS

METRICS_INTERVAL_S = 1.0


def utilisation(found: dict[str, list[float]]) -> dict[str, float]:
    """Each figure over its label sets (GPUs): memory summed, utilisation averaged."""
    return {
        figure: (sum(values) if figure in SUMMED_FIGURES else sum(values) / len(values))
        for figure, values in found.items()
        if values
    }


def parse_metric_lines(text: str) -> dict[str, list[float]]:
    """The utilisation samples of Prometheus text, without ``prometheus_client``.

    Tolerant: comments, other metrics and lines it cannot read are skipped. A sample line is
    ``name[{labels}] value [timestamp]``; the labels end at the line's last ``}``.
    """
    found: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        if brace >= 0:
            name, rest = line[:brace].strip(), line[line.rfind("}") + 1 :]
        else:
            name, _, rest = line.partition(" ")
        figure = UTILISATION_METRICS.get(name)
        parts = rest.split()
        if figure is None or not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        found.setdefault(figure, []).append(value)
    return found


def parse_metrics(text: str) -> dict[str, float]:
    """Utilisation figures of Prometheus text: ``prometheus_client``'s parser where it is installed."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return utilisation(parse_metric_lines(text))
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        figure = UTILISATION_METRICS.get(family.name)
        if figure is not None:
            for sample in family.samples:
                if sample.name == family.name:
                    found.setdefault(figure, []).append(float(sample.value))
    return utilisation(found)


def metrics_url(option: str, host: str) -> str:
    """``--triton-metrics-url``: ``none`` for none, default the Triton host's port 8002."""
    if option.strip().lower() == "none":
        return ""
    return option or f"http://{host_port(host, 8000)[0]}:8002/metrics"


@dataclass
class UtilisationSampler:
    """On the master: the metrics endpoint scraped every second in a greenlet."""

    url: str
    samples: list[dict[str, float]] = field(default_factory=list)
    failures: int = 0
    greenlet: Any = None

    def start(self) -> UtilisationSampler:
        """Start scraping."""
        self.greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> None:
        """Stop scraping."""
        if self.greenlet is not None:
            self.greenlet.kill(block=False)

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self.sample()
            gevent.sleep(max(0.0, METRICS_INTERVAL_S - (time.monotonic() - started)))

    def sample(self) -> None:
        """Scrape once; the first failure says so in one line."""
        try:
            with urllib.request.urlopen(self.url, timeout=SERVER_TIMEOUT_S) as response:
                text = response.read().decode("utf-8", errors="replace")
            self.samples.append(parse_metrics(text))
        except Exception as e:  # an endpoint down or garbled: no figures, never a failed run
            self.failures += 1
            if self.failures == 1:
                say(f"no CPU/GPU figures from the metrics endpoint {self.url}: {failure_text(e)}")

    def summary(self, kind: str) -> dict[str, Any] | None:
        """``util_mean``, ``util_max`` (0..1), ``mem_max_bytes`` of ``cpu`` or ``gpu``; None without any."""
        utils = [s[f"{kind}_util"] for s in self.samples if f"{kind}_util" in s]
        mems = [s[f"{kind}_mem_bytes"] for s in self.samples if f"{kind}_mem_bytes" in s]
        if not utils and not mems:
            return None
        figures: dict[str, Any] = {
            "util_mean": sum(utils) / len(utils) if utils else None,
            "util_max": max(utils) if utils else None,
            "mem_max_bytes": int(max(mems)) if mems else None,
            "source": "triton",
        }
        if kind == "gpu":
            figures |= {"memory_scope": "device", "devices": []}
        return figures
