"""Killing a server's process group after its leader was reaped: what is left of it, and nothing else."""

from __future__ import annotations

import subprocess

import psutil

from tritongen.server.process import kill_group


def test_the_members_left_by_a_reaped_leader_are_killed() -> None:
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    member = psutil.Process(int(leader.stdout.readline()))
    leader.wait()  # reaped: only the member holds the group's number now
    kill_group(leader)
    member.wait(timeout=10)
    assert not member.is_running()


def test_a_new_process_holding_a_reaped_leaders_number_is_left_alone() -> None:
    """The number of a reaped leader with no member left may go to a new process leading its own group."""
    newcomer = subprocess.Popen(["sleep", "60"], start_new_session=True)
    old = subprocess.Popen(["true"], start_new_session=True)
    old.wait()
    old.pid = newcomer.pid  # what reuse of the number looks like to the old leader's Popen
    try:
        kill_group(old)
        assert newcomer.poll() is None
    finally:
        newcomer.kill()
        newcomer.wait()


def test_a_running_leaders_group_is_killed() -> None:
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    kill_group(leader)
    assert leader.wait(timeout=10) == -9
