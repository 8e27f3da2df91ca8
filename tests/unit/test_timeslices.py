"""``--timeslice``: a run's windows merged a slice at a time; a slice that is not whole windows refused."""

from __future__ import annotations

import pytest

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.timeslices import slice_windows, timeslice_figures
from tritongen.loadtest.windows import Window


def _window(index: int, latencies_us: list[int], errors: int = 0) -> Window:
    window = Window(
        index=index, ok=len(latencies_us), errors={"timeout": errors} if errors else {}, sent=index
    )
    for value in latencies_us:
        window.histogram.record_value(value)
    return window


def test_windows_are_merged_a_slice_at_a_time_and_the_last_slice_may_be_short() -> None:
    windows = [_window(i, [1_000 * (i + 1)] * 10, errors=1 if i == 4 else 0) for i in range(5)]
    slices = timeslice_figures(windows, window_s=0.5, timeslice_s=1.0)
    assert [(s["start_s"], s["duration_s"], s["requests"], s["errors"]) for s in slices] == [
        (0.0, 1.0, 20, 0), (1.0, 1.0, 20, 0), (2.0, 0.5, 11, 1),
    ]  # fmt: skip
    assert [s["qps"] for s in slices] == [20.0, 20.0, 20.0]
    assert [s["sent"] for s in slices] == [0 + 1, 2 + 3, 4]  # sends that left in the slice, apart
    first, second, last = (s["latency_us"] for s in slices)
    assert [s["max"] for s in (first, second, last)] == [
        pytest.approx(v, rel=0.01) for v in (2_000, 4_000, 5_000)
    ]
    assert first["p50"] == pytest.approx(1_000, rel=0.01) and first["p99"] == pytest.approx(2_000, rel=0.01)
    assert second["p99"] == pytest.approx(4_000, rel=0.01) and last["p50"] == pytest.approx(5_000, rel=0.01)
    assert all("ttft_us" not in s for s in slices)  # not an LLM load


def test_an_llm_load_s_slices_have_their_token_latencies() -> None:
    window = _window(0, [50_000] * 4)
    for value in (9_000, 11_000):
        window.extra_histogram("ttft").record_value(value)
    (only,) = timeslice_figures([window], window_s=1.0, timeslice_s=1.0)
    assert only["ttft_us"]["p50"] == pytest.approx(9_000, rel=0.01) and "itl_us" not in only


def test_a_slice_must_be_a_whole_number_of_windows() -> None:
    assert slice_windows(10.0, 2.0) == 5 and slice_windows(1.5, 0.5) == 3
    with pytest.raises(ConfigError, match="not a whole number of measurement windows"):
        slice_windows(2.5, 1.0)


def _spec(**settings: object) -> LoadSpec:
    return LoadSpec(model="m", address=ServerAddress.parse("http://127.0.0.1:8000"), **settings)  # type: ignore[arg-type]


def test_without_window_the_window_divides_the_slice_and_a_bad_slice_is_refused() -> None:
    spec = _spec(duration_s=30.0, timeslice_s=7.0)
    assert spec.effective_window_s == pytest.approx(3.5)  # the default 5 s window would not divide it
    assert _spec(duration_s=30.0, timeslice_s=10.0).effective_window_s == pytest.approx(5.0)
    with pytest.raises(ConfigError, match=r"--timeslice 2\.5s is not a whole number"):
        _spec(window_s=1.0, timeslice_s=2.5)
    with pytest.raises(ConfigError, match="--timeslice must be positive"):
        _spec(timeslice_s=0.0)
