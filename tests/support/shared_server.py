"""The one embedded Triton server a test session shares, and the rule that its death is a failure.

A plugin (``pytest_plugins`` in the root conftest): the ``triton_server`` fixture, started once
per session (per xdist worker) on the session's ``served_repository``, and its watch:

- a test during whose setup, call or teardown the server dies fails, with the server's exit
  status, the end of its log and where the whole log is kept;
- the next test that takes the server gets a fresh one, so one death does not fail every test
  after it; a death no test was running for (between tests) fails the next test that takes the
  server, naming the test before it;
- a test that fails (or times out) while the server is alive shows the end of its log.
"""

from __future__ import annotations

import signal
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritongen.errors import TritongenError
from tritongen.server.local import LocalTritonServer

TAIL_LINES = 30
LOG_LINES_ON_FAILURE = 40


@dataclass
class ServerWatch:
    """The session's server, and what its watch knows of it."""

    server: LocalTritonServer
    last_test: str = "the start of the session"
    """The node id of the last test that ran while the server was alive."""
    death_reported: bool = False
    """Whether the current death already failed a test (the next one then just restarts it)."""


WATCH = pytest.StashKey[ServerWatch]()


def death_message(server: LocalTritonServer, when: str) -> str:
    """``the shared Triton server died during X (exit status N); its log (PATH) ends: ...``."""
    try:
        where = str(server.log_path)
        tail = "\n".join(server.log_tail(TAIL_LINES)) or "(empty)"
    except (OSError, TritongenError):
        where, tail = "no log", "(no log)"
    return (
        f"the shared Triton server died {when} (exit status {_status(server.exit_code)}); "
        f"its log ({where}) ends:\n{tail}"
    )


def _status(code: int | None) -> str:
    """``-9, SIGKILL`` (killed from outside: nothing in its log) or ``-6, SIGABRT`` (an abort it logged)."""
    if code is None or code >= 0:
        return str(code)
    try:
        return f"{code}, {signal.Signals(-code).name}"
    except ValueError:
        return str(code)


@pytest.fixture(scope="session")
def triton_server(served_repository: Path, pytestconfig: pytest.Config) -> Iterator[LocalTritonServer]:
    """The real embedded Triton server on ``served_repository``, one per test session, auto ports.

    It starts once (about 8 s for its models) and is shared by every module: a test that
    changes what the server serves (a model's config, loaded or not) puts it back. A test
    during which it dies fails (see this module).
    """
    with LocalTritonServer(served_repository, http_port=0, grpc_port=0, metrics_port=0) as server:
        pytestconfig.stash[WATCH] = ServerWatch(server)
        try:
            yield server
        finally:
            del pytestconfig.stash[WATCH]  # stopped on purpose from here on: not a death


@pytest.fixture(autouse=True)
def _shared_server_alive(request: pytest.FixtureRequest) -> None:
    """A test that takes the shared server finds it running: one that died is started again.

    A death that already failed the test it happened in is just repaired; one that happened
    between tests fails this test's setup after the restart, so no death passes unseen.
    """
    if "triton_server" not in request.fixturenames:
        return
    request.getfixturevalue("triton_server")
    watch = request.config.stash[WATCH]
    server = watch.server
    if server.is_running():
        return
    message = (
        None if watch.death_reported else death_message(server, f"after {watch.last_test}, between tests")
    )
    server.stop()
    server.start()
    watch.death_reported = False
    if message is not None:
        pytest.fail(f"{message}\n(started again for {request.node.nodeid})", pytrace=False)


def _watched(item: pytest.Item, phase: str) -> Generator[None, object, object]:
    """Run one phase of ``item``; fail it when the shared server was alive before and is dead after.

    When the phase failed on its own as well, its exception stays in the report, chained.
    """
    watch = item.config.stash.get(WATCH, None)
    alive = watch is not None and watch.server.is_running()
    try:
        result = yield
    except BaseException:
        _check(item, watch if alive else None, phase, pytrace=True)
        uses = "triton_server" in getattr(item, "fixturenames", ())
        if alive and uses and watch is not None and watch.server.is_running():
            _attach_log(item, watch.server, phase)
        raise
    _check(item, watch if alive else None, phase, pytrace=False)
    return result


def _attach_log(item: pytest.Item, server: LocalTritonServer, phase: str) -> None:
    """Show the end of the live server's log under a failed (or timed-out) test: what it was doing then."""
    try:
        tail = "\n".join(server.log_tail(LOG_LINES_ON_FAILURE)) or "(empty)"
    except (OSError, TritongenError):
        return
    item.add_report_section(phase, f"Triton server log, last {LOG_LINES_ON_FAILURE} lines", tail)


def _check(item: pytest.Item, watch: ServerWatch | None, phase: str, pytrace: bool) -> None:
    """Fail ``item`` when the server ``watch`` saw alive died during its ``phase`` (once per death)."""
    if watch is None or item.config.stash.get(WATCH, None) is not watch:
        return  # not running before, or stopped on purpose at the session's end
    if watch.server.is_running():
        watch.last_test = item.nodeid
    elif not watch.death_reported:
        watch.death_reported = True
        pytest.fail(death_message(watch.server, f"during the {phase} of {item.nodeid}"), pytrace=pytrace)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """A death during the test's setup fails it."""
    return (yield from _watched(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A death during the test fails it, even when the test itself passed."""
    return (yield from _watched(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """A death during the test's teardown fails it."""
    return (yield from _watched(item, "teardown"))
