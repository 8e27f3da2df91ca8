"""The ``gpu`` marker: how a GPU is detected, and that marked tests are skipped where there is none."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from support.gpus import ListGpus, gpu_skip_reason, host_gpu_skip_reason, skip_gpu_items

H200 = "GPU 0: NVIDIA H200 (UUID: GPU-0b5e7b8c-0000-0000-0000-000000000000)\n"
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def _on_path(name: str) -> str | None:
    return f"/usr/bin/{name}"


def _answers(code: int, stdout: str = "", stderr: str = "") -> ListGpus:
    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert argv == ["/usr/bin/nvidia-smi", "-L"]
        return subprocess.CompletedProcess(argv, code, stdout, stderr)

    return run


def _times_out(argv: list[str]) -> subprocess.CompletedProcess[str]:
    raise subprocess.TimeoutExpired(argv, 30)


def test_a_listed_gpu_means_no_skip() -> None:
    assert gpu_skip_reason(_on_path, _answers(0, H200)) is None
    two = H200 + H200.replace("GPU 0", "GPU 1")
    assert gpu_skip_reason(_on_path, _answers(0, two)) is None


@pytest.mark.parametrize(
    ("which", "run", "reason"),
    [
        (lambda _name: None, _answers(0, H200), "nvidia-smi is not on PATH"),
        (_on_path, _answers(9, NO_DRIVER), "nvidia-smi -L exited 9 (NVIDIA-SMI has failed"),
        (_on_path, _answers(0, "No devices found.\n"), "nvidia-smi -L lists none"),
        (_on_path, _answers(0, ""), "nvidia-smi -L lists none"),
        (_on_path, _times_out, "nvidia-smi -L could not run"),
    ],
    ids=["no-binary", "no-driver", "no-device", "silent", "hangs"],
)
def test_no_usable_gpu_gives_a_reason(which: Callable[[str], str | None], run: ListGpus, reason: str) -> None:
    got = gpu_skip_reason(which, run)
    assert got is not None and got.startswith("no NVIDIA GPU: ") and reason in got
    assert "\n" not in got


class _Item:
    """The part of a collected test that ``skip_gpu_items`` uses."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.own_markers = [m.mark for m in marks]

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in self.own_markers if m.name == name), None)

    def add_marker(self, marker: pytest.MarkDecorator, append: bool = True) -> None:
        self.own_markers.insert(len(self.own_markers) if append else 0, marker.mark)


def test_only_marked_items_are_skipped_and_the_gpu_reason_comes_first() -> None:
    tool = pytest.mark.skipif(True, reason="trtexec is missing")
    marked, marked_with_tool, plain = _Item(pytest.mark.gpu), _Item(pytest.mark.gpu, tool), _Item()
    skip_gpu_items([marked, marked_with_tool, plain], lambda: "no NVIDIA GPU: test")  # type: ignore[list-item]
    for item in (marked, marked_with_tool):
        first = next(m for m in item.own_markers if m.name == "skipif")
        assert first.args == (True,) and first.kwargs == {"reason": "no NVIDIA GPU: test"}
    assert [m.name for m in marked_with_tool.own_markers] == ["skipif", "gpu", "skipif"]
    assert plain.own_markers == []


def test_nothing_is_skipped_with_a_gpu_and_nothing_asked_without_marked_tests() -> None:
    marked = _Item(pytest.mark.gpu)
    skip_gpu_items([marked], lambda: None)  # type: ignore[list-item]
    assert [m.name for m in marked.own_markers] == ["gpu"]

    def never() -> str | None:
        raise AssertionError("asked for a GPU with no gpu test collected")

    skip_gpu_items([_Item(), _Item(pytest.mark.slow)], never)  # type: ignore[list-item]


@pytest.mark.gpu
def test_marked_tests_run_only_where_a_gpu_is_listed() -> None:
    assert host_gpu_skip_reason() is None


def test_collected_marked_tests_are_skipped_exactly_where_there_is_no_gpu(
    request: pytest.FixtureRequest,
) -> None:
    reason = host_gpu_skip_reason()
    for item in request.session.items:
        if item.get_closest_marker("gpu") is None:
            continue
        added = [m for m in item.iter_markers("skipif") if m.kwargs.get("reason") == reason]
        if reason is None:
            assert added == [], item.nodeid
        else:
            assert len(added) == 1 and added[0].args == (True,), item.nodeid
            assert next(item.iter_markers("skipif")) is added[0], "the GPU skip comes first"
