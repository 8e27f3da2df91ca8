"""Sample Triton's Prometheus endpoint once a second and summarise a time range."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

# Triton metric name -> (figure, how several label sets combine).
UTILISATION_METRICS: dict[str, str] = {
    "nv_gpu_utilization": "gpu_util",
    "nv_gpu_memory_used_bytes": "gpu_mem_bytes",
    "nv_cpu_utilization": "cpu_util",
    "nv_cpu_memory_used_bytes": "cpu_mem_bytes",
}
_SUMMED = {"gpu_mem_bytes", "cpu_mem_bytes"}


@dataclass(frozen=True)
class Sample:
    """One scrape: wall-clock time and the figures found (GPU figures missing without a GPU)."""

    time: float
    values: dict[str, float]


def parse_metrics(text: str) -> dict[str, float]:
    """Pick the utilisation figures out of Prometheus text.

    Several GPUs: utilisation is averaged, memory summed.
    """
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        figure = UTILISATION_METRICS.get(family.name)
        if figure is None:
            continue
        for sample in family.samples:
            if sample.name == family.name:
                found.setdefault(figure, []).append(float(sample.value))
    return {
        figure: (sum(values) if figure in _SUMMED else sum(values) / len(values))
        for figure, values in found.items()
        if values
    }


@dataclass
class UtilisationSummary:
    """Mean/max utilisation (0..1) and peak memory over a window; None where not reported."""

    util_mean: float | None
    util_max: float | None
    mem_max_bytes: int | None

    def as_dict(self) -> dict[str, float | int | None]:
        """JSON form."""
        return {"util_mean": self.util_mean, "util_max": self.util_max, "mem_max_bytes": self.mem_max_bytes}


@dataclass
class MetricsSampler:
    """A background thread scraping ``url`` every ``interval_s`` seconds."""

    url: str
    interval_s: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> MetricsSampler:
        """Start scraping."""
        self._thread = threading.Thread(target=self._loop, name="tritongen-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop scraping and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    text = response.read().decode("utf-8", errors="replace")
                self.samples.append(Sample(time=time.time(), values=parse_metrics(text)))
            except (urllib.error.URLError, OSError, ValueError):
                self.failures += 1
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def summary(self, kind: str, start: float, end: float) -> UtilisationSummary | None:
        """Utilisation of ``kind`` (``gpu`` or ``cpu``) between two wall-clock times.

        Returns None when the server reported no such figure (e.g. no GPU).
        """
        inside = [s for s in self.samples if start <= s.time <= end]
        utils = [s.values[f"{kind}_util"] for s in inside if f"{kind}_util" in s.values]
        mems = [s.values[f"{kind}_mem_bytes"] for s in inside if f"{kind}_mem_bytes" in s.values]
        if not utils and not mems:
            return None
        return UtilisationSummary(
            util_mean=sum(utils) / len(utils) if utils else None,
            util_max=max(utils) if utils else None,
            mem_max_bytes=int(max(mems)) if mems else None,
        )
