"""What a Locust process that stays up is given: the process's options once, every run option each run."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from tritongen.io.loadgen_shared import OPTIONS
from tritongen.loadtest.load_processes import (
    ProcessKind,
    ServiceCommand,
    active_processes,
    kind_of,
    load_processes,
)
from tritongen.loadtest.locust_process import LocustArgs

ARGS = LocustArgs(
    host="127.0.0.1:8000", model="m", protocol="http", users=2, processes=1, run_time_s=30, window_s=0.5,
    t0=100.0, results=Path("r.jsonl"), inputs=Path("i.npz"),
)  # fmt: skip


def test_a_run_sets_every_locustfile_option() -> None:
    """Each run names every ``--triton-*`` option, so none is left over from the run before."""
    assert set(ARGS.run_options()) == {option.name for option in OPTIONS}
    sequences = {"sequences": "1", "sequence-length": "4"}
    rate = replace(ARGS, user_rate=20.0, arrival="poisson", kind="sequence", kind_options=sequences)
    assert rate.run_options()["user-rate"] == "20.0" and rate.run_options()["sequences"] == "1"
    # back to a closed loop without sequences: the defaults again, not the rate run's values
    assert ARGS.run_options()["user-rate"] == "0.0" and ARGS.run_options()["sequences"] == "0"
    assert ARGS.run_options()["kind"] == "auto" and rate.run_options()["kind"] == "sequence"
    assert ARGS.run_options()["metrics-url"] == "none"


def test_the_command_line_holds_the_run_options_that_are_set() -> None:
    rate = replace(ARGS, user_rate=5.0, arrival="poisson")
    argv = rate.options()
    given = dict(itertools.pairwise(argv))
    for name in ("model", "user-rate", "arrival", "t0", "results", "metrics-url"):
        assert given[f"--triton-{name}"] == rate.run_options()[name]
    assert "--triton-json" not in argv and "--triton-llm-api" not in argv  # at their defaults


def test_a_kind_s_options_are_locustfile_options() -> None:
    llm = replace(ARGS, kind="triton-llm", kind_options={"llm-api": "triton-generate", "llm-stream": "1"})
    assert llm.run_options()["llm-api"] == "triton-generate"
    assert dict(itertools.pairwise(llm.options()))["--triton-kind"] == "triton-llm"
    with pytest.raises(ValueError, match="not --triton-"):
        replace(ARGS, kind_options={"llm-apis": "x"}).run_options()


def test_runs_that_need_a_process_of_their_own() -> None:
    assert kind_of(ARGS) == ProcessKind(1, None)
    assert kind_of(replace(ARGS, processes=3, cpus=frozenset({1}))) == ProcessKind(3, frozenset({1}))
    assert kind_of(replace(ARGS, web_port=18089)) is None  # the web UI shown to the user
    assert kind_of(replace(ARGS, master_args=("--master", "--expect-workers", "2"))) is None


def test_the_service_command_line() -> None:
    argv = ServiceCommand(ProcessKind(2, None), 18123).argv()
    assert "--headless" not in argv and "--autostart" not in argv
    assert argv[argv.index("--web-host") + 1] == "127.0.0.1" and argv[argv.index("--web-port") + 1] == "18123"
    assert argv[argv.index("--stop-timeout") + 1] == "0"  # a run's users stop at once
    assert argv[argv.index("--processes") + 1] == "2"
    assert "--processes" not in ServiceCommand(ProcessKind(1, None), 18123).argv()


def test_nested_load_processes_share_the_outer_set() -> None:
    assert active_processes() is None
    with load_processes() as outer:
        with load_processes() as inner:
            assert inner is outer and active_processes() is outer
        assert active_processes() is outer
        assert outer.workdir.is_dir()
    assert active_processes() is None and not outer.workdir.exists()
    with load_processes(share=False) as fresh:
        assert not fresh.share
