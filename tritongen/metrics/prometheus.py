"""Sample Triton's Prometheus endpoint once a second and summarise a time range.

Where the endpoint has no GPU figures (no DCGM: the embedded server, many MIG or shared
hosts) and the server is on this machine, NVML fills them in (:mod:`tritongen.metrics.nvml`);
every sample and summary says where its GPU figures came from.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from tritongen.io.loadgen_shared import SUMMED_FIGURES, UTILISATION_METRICS
from tritongen.metrics.nvml import NvmlReader, open_nvml


@dataclass(frozen=True)
class Sample:
    """One scrape: wall-clock time and the figures found (GPU figures missing without a GPU)."""

    time: float
    values: dict[str, float]
    gpu_source: str | None = None
    """Where the GPU figures came from: ``triton`` (the metrics endpoint, DCGM) or ``nvml``."""
    memory_scope: str | None = None
    """What the GPU memory counts: ``device`` or ``server-processes``."""
    devices: tuple[str, ...] = ()
    """Names of the GPUs counted (NVML only)."""
    gpus: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each GPU's figures by UUID, from the metrics endpoint (:func:`parse_gpu_devices`)."""


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
        figure: (sum(values) if figure in SUMMED_FIGURES else sum(values) / len(values))
        for figure, values in found.items()
        if values
    }


GPU_DEVICE_METRICS = {
    "nv_gpu_utilization": "util",
    "nv_gpu_power_usage": "power_w",
    "nv_gpu_memory_used_bytes": "mem_used_bytes",
    "nv_gpu_memory_total_bytes": "mem_total_bytes",
}
"""Triton's per-GPU metric → figure (each sample labelled with its ``gpu_uuid``)."""


def parse_gpu_devices(text: str) -> dict[str, dict[str, float]]:
    """Each GPU's figures in Prometheus text, by UUID (empty without GPU metrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    devices: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        figure = GPU_DEVICE_METRICS.get(family.name)
        if figure is None:
            continue
        for sample in family.samples:
            uuid = sample.labels.get("gpu_uuid")
            if sample.name == family.name and uuid:
                devices.setdefault(uuid, {})[figure] = float(sample.value)
    return devices


def gpu_device_summary(samples: list[dict[str, float]]) -> dict[str, float | int | None]:
    """One GPU over a time range as perf_analyzer sums it up: mean use and power, peak and total memory.

    The total memory is the first one reported.
    """
    utils = [s["util"] for s in samples if "util" in s]
    powers = [s["power_w"] for s in samples if "power_w" in s]
    used = [s["mem_used_bytes"] for s in samples if "mem_used_bytes" in s]
    total = next((s["mem_total_bytes"] for s in samples if "mem_total_bytes" in s), None)
    return {
        "util_mean": sum(utils) / len(utils) if utils else None,
        "power_mean_w": sum(powers) / len(powers) if powers else None,
        "mem_max_bytes": int(max(used)) if used else None,
        "mem_total_bytes": None if total is None else int(total),
    }


@dataclass
class UtilisationSummary:
    """Mean/max utilisation (0..1) and peak memory over a window; None where not reported."""

    util_mean: float | None
    util_max: float | None
    mem_max_bytes: int | None
    source: str = "triton"
    """``triton`` (the metrics endpoint; DCGM for GPUs) or ``nvml``."""
    memory_scope: str | None = None
    """GPU only: ``device`` or ``server-processes``."""
    devices: list[str] | None = None
    """GPU only: names of the GPUs counted (empty where the metrics endpoint gave the figures)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON form; a GPU summary adds ``memory_scope`` and ``devices``."""
        figures: dict[str, Any] = {
            "util_mean": self.util_mean,
            "util_max": self.util_max,
            "mem_max_bytes": self.mem_max_bytes,
            "source": self.source,
        }
        if self.devices is not None:
            figures |= {"memory_scope": self.memory_scope, "devices": self.devices}
        return figures

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UtilisationSummary:
        """Read what :meth:`as_dict` wrote (a run's ``gpu`` or ``cpu``)."""
        devices = data.get("devices")
        return cls(
            util_mean=data.get("util_mean"),
            util_max=data.get("util_max"),
            mem_max_bytes=data.get("mem_max_bytes"),
            source=str(data.get("source", "triton")),
            memory_scope=data.get("memory_scope"),
            devices=None if devices is None else [str(d) for d in devices],
        )


@dataclass
class MetricsSampler:
    """A background thread scraping ``url`` every ``interval_s`` seconds (NVML filling in GPU figures)."""

    url: str
    interval_s: float = 1.0
    _: KW_ONLY
    server_pid: int | None = None
    """The server's process (this machine): NVML counts the GPUs and memory of its process tree."""
    nvml: bool = True
    """Fill in GPU figures from NVML where the metrics endpoint has none."""
    parse: Callable[[str], dict[str, float]] = parse_metrics
    """What the figures of the endpoint's text are (Triton's utilisation by default; vLLM's)."""
    samples: list[Sample] = field(default_factory=list)
    failures: int = 0
    nvml_reason: str | None = None
    """Why NVML gives no figures (``None`` while it does, or when ``nvml`` is off)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _reader: NvmlReader | None = None

    def start(self) -> MetricsSampler:
        """Open NVML (where asked) and start scraping."""
        if self.nvml:
            opened = open_nvml(self.server_pid, self.url)
            self._reader, self.nvml_reason = (None, opened) if isinstance(opened, str) else (opened, None)
        self._thread = threading.Thread(target=self._loop, name="tritongen-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop scraping, wait for the thread and release NVML."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._reader is not None and (self._thread is None or not self._thread.is_alive()):
            self._reader.close()

    @property
    def nvml_failures(self) -> int:
        """NVML reads that failed (after a few in a row the reader stops)."""
        return self._reader.failures if self._reader is not None else 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            values: dict[str, float] | None = None
            gpus: dict[str, dict[str, float]] = {}
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    text = response.read().decode("utf-8", errors="replace")
                values = self.parse(text)
                gpus = parse_gpu_devices(text) if values else {}
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
                self.failures += 1  # down, or cut mid-answer (IncompleteRead): a sample lost, not the thread
            try:
                sample = self._sample(values or {}, time.time())
            except Exception:  # a GPU reading gone wrong costs this sample, not the thread
                self.failures += 1
                sample = Sample(time=time.time(), values=values or {})
            if values is not None or sample.gpu_source is not None:
                self.samples.append(replace(sample, gpus=gpus) if gpus else sample)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _sample(self, values: dict[str, float], when: float) -> Sample:
        """A sample of the scraped figures, with NVML's GPU figures where the endpoint has none."""
        if "gpu_util" in values or "gpu_mem_bytes" in values:
            return Sample(time=when, values=values, gpu_source="triton", memory_scope="device")
        figures = self._reader.read() if self._reader is not None else None
        if figures is None:
            return Sample(time=when, values=values)
        gpu = {"gpu_util": figures.util, "gpu_mem_bytes": figures.mem_bytes}
        return Sample(
            time=when,
            values=values | {k: float(v) for k, v in gpu.items() if v is not None},
            gpu_source="nvml",
            memory_scope=figures.memory_scope,
            devices=figures.devices,
        )

    def gpu_samples(self) -> list[Sample]:
        """The samples with GPU figures, of one source: the metrics endpoint's where it gave any."""
        with_gpu = [s for s in self.samples if s.gpu_source is not None]
        if any(s.gpu_source == "triton" for s in with_gpu):
            return [s for s in with_gpu if s.gpu_source == "triton"]
        return with_gpu

    def gpu_devices(self, start: float, end: float) -> dict[str, dict[str, float | int | None]]:
        """Each GPU the metrics endpoint reported between two wall-clock times, by UUID (empty: none)."""
        by_uuid: dict[str, list[dict[str, float]]] = {}
        for sample in self.samples:
            if start <= sample.time <= end:
                for uuid, figures in sample.gpus.items():
                    by_uuid.setdefault(uuid, []).append(figures)
        return {uuid: gpu_device_summary(figures) for uuid, figures in sorted(by_uuid.items())}

    def summary(self, kind: str, start: float, end: float) -> UtilisationSummary | None:
        """Utilisation of ``kind`` (``gpu`` or ``cpu``) between two wall-clock times.

        Returns None when the server reported no such figure (e.g. no GPU).
        """
        pool = self.gpu_samples() if kind == "gpu" else self.samples
        inside = [s for s in pool if start <= s.time <= end]
        utils = [s.values[f"{kind}_util"] for s in inside if f"{kind}_util" in s.values]
        mems = [s.values[f"{kind}_mem_bytes"] for s in inside if f"{kind}_mem_bytes" in s.values]
        if not utils and not mems:
            return None
        summary = UtilisationSummary(
            util_mean=sum(utils) / len(utils) if utils else None,
            util_max=max(utils) if utils else None,
            mem_max_bytes=int(max(mems)) if mems else None,
        )
        if kind == "gpu":
            summary.source = inside[0].gpu_source or "triton"
            scopes = Counter(s.memory_scope for s in inside if s.memory_scope)
            summary.memory_scope = scopes.most_common(1)[0][0] if scopes else "device"
            summary.devices = list(next((s.devices for s in reversed(inside) if s.devices), ()))
        return summary
