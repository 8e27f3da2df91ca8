"""The server's own counters (its statistics API) at the edges of a level's measured span.

Every model's counters are read in one statistics call at the first poll of each window; the
measured span's figures are the differences between the reads at its first window and at the
window after its last: the model's queue and compute time per request, its mean batch, and
every model the requests touched (an ensemble's steps, a BLS model's callees) as a tree.
"""

from __future__ import annotations

import time

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ServerError
from tritongen.metrics.composing import AllStats, ServerModels, all_snapshots, cached_lookup, server_models
from tritongen.metrics.statistics import ServerBreakdown, breakdown

Edge = tuple[float, AllStats]
"""When the counters were read (epoch) and every model's counters then."""


class ServerCounters:
    """The counters read window by window during one level (one statistics call a window)."""

    def __init__(self, endpoint: TritonEndpoint) -> None:
        self.endpoint = endpoint
        self.reads: dict[int, Edge] = {}
        """Every model's counters at the first poll of each window, by window index."""
        self.configs = cached_lookup(endpoint.model_config)
        """Each model's config, read once (what a model calls decides the tree)."""

    def take(self, window_index: int) -> None:
        """Read the counters at the first poll of window ``window_index`` (a failed read is skipped)."""
        if window_index in self.reads:
            return
        try:
            stats = all_snapshots(self.endpoint.all_statistics())
        except ServerError:
            return
        self.reads[window_index] = (time.time(), stats)

    def edges(self, start: int, end: int) -> tuple[Edge | None, Edge | None]:
        """The counters at the measured span's start and end.

        Where a slow poll (a busy machine) missed a window's read, the nearest outside the span
        stands in (the span then reaches a little wider).
        """
        before = self.reads.get(start)
        if before is None:
            earlier = [i for i in self.reads if i < start]
            before = self.reads[max(earlier)] if earlier else None
        after = self.reads.get(end)
        if after is None:
            later = [i for i in self.reads if i > end]
            after = self.reads[min(later)] if later else None
        return before, after

    def breakdown(self, model: str, start: int, end: int) -> ServerBreakdown | None:
        """``model``'s queue and compute time per request and mean batch over windows ``start`` to ``end``."""
        before, after = self.edges(start, end)
        if before is None or after is None or model not in before[1] or model not in after[1]:
            return None
        return breakdown(before[1][model], after[1][model])

    def models(self, top: str, start: int, end: int) -> ServerModels:
        """Each model the span's requests touched, as a tree under ``top``."""
        before, after = self.edges(start, end)
        if before is None or after is None:
            return {}
        return server_models(before[1], after[1], top, self.configs)
