"""Other processes' CPU is counted process by process, outside our trees."""

from __future__ import annotations

import os

import pytest

from tritongen.metrics.other_cpu import OtherCpuSampler, others_used, process_seconds, tree_pids


def test_only_processes_outside_ours_count_and_a_new_one_from_its_start() -> None:
    before = {1: (10.0, 100.0), 2: (5.0, 100.0), 3: (7.0, 100.0)}
    now = {
        1: (10.5, 100.0),  # another process: 0.5 s
        2: (9.0, 100.0),  # ours: not counted
        3: (1.0, 205.0),  # pid 3 reused by a process started after the first reading: all of it
        4: (0.25, 201.0),  # started after the first reading: all of it
        5: (30.0, 50.0),  # seen for the first time but older: from now on
    }
    assert others_used(before, now, ours={2}, since=200.0) == pytest.approx(0.5 + 1.0 + 0.25)
    assert others_used(now, now, ours=set(), since=300.0) == 0.0


def test_this_process_is_in_its_own_tree_and_the_sampler_reads_the_machine() -> None:
    assert os.getpid() in tree_pids([os.getpid()]) and tree_pids([-1]) == set()
    assert os.getpid() in process_seconds()
    sampler = OtherCpuSampler(lambda: [os.getpid()], interval_s=0.05)
    sampler.start()
    try:
        while len(sampler.samples) < 3:
            sum(range(10_000))  # this process's own work, never another's
    finally:
        sampler.stop()
    assert all(cores >= 0.0 for _, cores in sampler.samples)
