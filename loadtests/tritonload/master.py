"""The master's (or a lone local runner's) part around each test: server figures, last windows, the report.

The statistics API is read when the test starts and once the workers' last windows are in;
the metrics endpoint is scraped in between. When the test stops, workers still running are
stopped first (so their last windows come in now), the report waits for every worker's last
windows (their stop timeout and ``FINAL_WAIT_S`` at most), then prints and writes it
(:mod:`.report`). Only the master talks to the server this way, from greenlets with short
timeouts; a failure leaves those figures null and says so in one line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust.runners import MasterRunner

from .options import TritonOptions
from .recording import Collector
from .report import (
    ServerFigures,
    report_document,
    report_lines,
    request_rows,
    run_result,
    say,
    server_breakdown,
    stats_counters,
    write_document,
)
from .server_api import failure_text, host_port, model_max_batch, model_statistics
from .shared import SUMMARY_KEY
from .utilisation import UtilisationSampler, metrics_url

FINAL_WAIT_S = 2.0
"""How long the report waits for the workers' last windows, beyond their stop timeout."""


def stop_workers(environment: Any, stopped: set[str]) -> None:
    """On a master: tell the workers still running to stop, so that their last windows come in now.

    A headless master's ``--run-time`` (or its last worker gone) quits the test without
    stopping the workers first: they would stop on the quit message, after the master
    stopped listening, and their last windows would be lost. Locust forgets a stopped worker
    until it says it is ready again, so its own quit message would miss them: they go into
    ``stopped`` for :func:`quit_stopped_workers`.
    """
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    from locust.rpc import Message
    from locust.runners import STATE_RUNNING, STATE_SPAWNING

    for client in runner.clients.all:
        if client.state in (STATE_RUNNING, STATE_SPAWNING):
            runner.server.send_to_client(Message("stop", data=None, node_id=client.id))
            stopped.add(str(client.id))


def quit_stopped_workers(environment: Any, stopped: set[str]) -> None:
    """On a headless master (one test, then it quits): send quit to the workers it stopped itself."""
    runner = environment.runner
    if not isinstance(runner, MasterRunner) or not getattr(environment.parsed_options, "headless", False):
        return
    from locust.rpc import Message

    for worker in sorted(stopped):
        runner.server.send_to_client(Message("quit", data=None, node_id=worker))
    stopped.clear()


def server_host(environment: Any) -> str:
    """The Triton server the load goes to (``--host``)."""
    return str(environment.host or getattr(environment.parsed_options, "host", "") or "127.0.0.1:8000")


@dataclass
class MasterReport:
    """On the master (or a lone local runner): the server's figures around each test, and its report.

    The statistics API is read when the test starts and once its last windows are in; the
    metrics endpoint is scraped every second in between. The report waits for every worker's
    last windows (their stop timeout and ``FINAL_WAIT_S`` at most).
    """

    collector: Collector
    """The merged windows the report is made of."""
    before: dict[str, int] | None = None
    max_batch: int | None = None
    sampler: UtilisationSampler | None = None
    done: bool = False
    started: bool = False
    """Whether a test has started (a process that quits without one reports nothing)."""
    stopped_workers: set[str] = field(default_factory=set)
    """Workers this master stopped itself (see :func:`stop_workers`)."""

    def on_test_start(self, environment: Any, **_: Any) -> None:
        """Forget the last test; read the model's statistics and start scraping the metrics endpoint."""
        options = TritonOptions.from_parsed(environment.parsed_options)
        self.collector.start_run(options.results, options.window)
        if self.sampler is not None:
            self.sampler.stop()
        self.done, self.before, self.max_batch, self.started = False, None, None, True
        if not options.report:  # no report: no server figures for it either
            return
        host = server_host(environment)
        try:
            self.max_batch = model_max_batch(host, options.protocol, options.model)
            self.before = stats_counters(model_statistics(host, options.protocol, options.model))
        except Exception as e:  # the load goes on; the report has no server figures
            say(f"no server statistics for {options.model}: {failure_text(e)}")
        url = metrics_url(options.metrics_url, host)
        self.sampler = UtilisationSampler(url).start() if url else None

    def on_test_stopping(self, environment: Any, **_: Any) -> None:
        """Note when the test stopped."""
        if self.collector.stopped is None:
            self.collector.stopped = time.monotonic()

    def on_test_stop(self, environment: Any, **_: Any) -> None:
        """Report once the workers' last windows are in (workers still running are stopped first)."""
        if self.done:
            return
        self.on_test_stopping(environment)
        stop_workers(environment, self.stopped_workers)
        deadline = time.monotonic() + FINAL_WAIT_S + float(getattr(environment, "stop_timeout", 0) or 0)
        while time.monotonic() < deadline and not self.all_final(environment):
            gevent.sleep(0.05)
        self.finish(environment)
        quit_stopped_workers(environment, self.stopped_workers)

    def on_quitting(self, environment: Any, **_: Any) -> None:
        """Report a test still running when the process is told to quit (SIGTERM, Ctrl-C).

        A lone local runner stops its users first. A master reports what its workers have
        sent so far: they stop on its quit message, and a stop message first would hold a
        worker's quit back by its stop timeout (``tritongen loadtest --master`` stops each
        run's master this way and reads the windows itself).
        """
        from locust.runners import STATE_RUNNING, STATE_SPAWNING

        runner, collector = environment.runner, self.collector
        if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            collector.interrupted = True
            if not isinstance(runner, MasterRunner):
                runner.stop()  # test_stop: this process's last windows, then the report
        self.finish(environment)

    def all_final(self, environment: Any) -> bool:
        """Whether every worker still loading has sent its last windows.

        A worker that has stopped (Locust drops it from the clients) sent them before saying so.
        """
        from locust.runners import STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

        collector, runner = self.collector, environment.runner
        if not isinstance(runner, MasterRunner):
            return True  # a lone local runner hands its last windows over as its test stops
        loading = (STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING)
        return all(str(c.id) in collector.finals for c in runner.clients.all if c.state in loading)

    def finish(self, environment: Any) -> None:
        """Print the report, write ``--triton-json`` and the ``summary`` line of ``--triton-results``."""
        collector = self.collector
        if self.done or not self.started:
            return
        self.done = collector.printed = True
        if self.sampler is not None:
            self.sampler.stop()
        collector.keep_windows(everything=True)
        options = TritonOptions.from_parsed(environment.parsed_options)
        if not options.report:  # only the line that says the test has ended
            if collector.path:
                with open(collector.path, "a") as out:
                    out.write(json.dumps({SUMMARY_KEY: None, "at": time.time()}) + "\n")
            return
        host = server_host(environment)
        url = "{}:{}".format(*host_port(host, 8001 if options.protocol == "grpc" else 8000))
        users = int(getattr(environment.runner, "target_user_count", 0) or 0)
        users = users or int(getattr(environment.parsed_options, "num_users", 0) or 0)
        run = run_result(collector, options, users, self.server_figures(host, options))
        print("\n".join([collector.summary(), *report_lines(run, options, url)]), flush=True)
        if options.json:
            write_document(options.json, report_document(options, url, run))
        if collector.path:
            with open(collector.path, "a") as out:
                out.write(json.dumps({SUMMARY_KEY: run, "at": time.time()}) + "\n")

    def server_figures(self, host: str, options: TritonOptions) -> ServerFigures:
        """The statistics API's figures since the test started, and the metrics endpoint's."""
        server_us: dict[str, float | None] | None = None
        avg_batch = None
        if self.before is not None:
            try:
                after = stats_counters(model_statistics(host, options.protocol, options.model))
                server_us, avg_batch = server_breakdown(self.before, after)
            except Exception as e:  # the report goes on without them
                say(f"no server statistics for {options.model} after the test: {failure_text(e)}")
        sampler = self.sampler
        return ServerFigures(
            server_us=server_us,
            avg_batch=avg_batch,
            cpu=sampler.summary("cpu") if sampler is not None else None,
            gpu=sampler.summary("gpu") if sampler is not None else None,
            rows=request_rows(options, self.max_batch),
        )

    def register(self, environment: Any) -> None:
        """Listen to the test's events (after this file's own listeners: last windows first)."""
        events_ = environment.events
        events_.test_start.add_listener(self.on_test_start)
        events_.test_stopping.add_listener(self.on_test_stopping)
        events_.test_stop.add_listener(self.on_test_stop)
        events_.quitting.add_listener(self.on_quitting)
