r"""Locust users that load one Triton model over HTTP or gRPC, timed at microsecond resolution.

Standalone::

    locust -f loadtests/locustfile.py --headless -u 8 -t 30s --host http://127.0.0.1:8000 \\
        --triton-model mlp_onnx

    # gRPC, open loop at 200 requests/s per user, Poisson arrivals:
    locust -f loadtests/locustfile.py --headless -u 1 -t 30s --host 127.0.0.1:8001 \\
        --triton-model mlp_onnx --triton-protocol grpc --triton-user-rate 200 --triton-arrival poisson

Every option also reads an environment variable (``TRITONGEN_MODEL``, ``TRITONGEN_PROTOCOL``,
...; see ``--help``). ``tritongen loadtest`` runs this file as headless Locust subprocesses;
the compose ``loadtest`` profile runs it as a master with workers.

This file holds the options, Locust's event listeners and the user; the load generator
itself is the package beside it, ``loadtests/tritonload/`` (imported as ``tritonload``: Locust
puts this folder on ``sys.path``), one module per job, each saying in its docstring what it
holds: the ``--triton-*`` table (``options``), request data (``payloads``), the recording of
windows and the run's report (``recording``, ``report``, ``master``), distributed runs
(``workers``), the loops (``loops``, ``http_engine``) and the load kinds, registered by name
in ``kinds``, each sent by a module of its own. Run it from the folder: neither this file nor
the package imports tritongen, so the folder also runs in a plain Locust container with
tritonclient, numpy, hdrhistogram and prometheus_client.

How it measures: every request's latency goes into an HDR histogram of the worker that
sent it (Locust's own percentiles are rounded to whole milliseconds). Each worker sends
one histogram per measurement window (wall-clock aligned, so windows of different
workers and machines line up) to the master, which merges them, appends them to
``--triton-results`` (JSON lines) and prints the run's report when the test ends (with the
server's statistics and utilisation; ``--triton-json`` writes it). In open-loop mode
(``--triton-user-rate``) latency is counted from each request's *scheduled* send time, so a
slow server or a late generator cannot hide queueing delay; at ``--triton-max-inflight``
requests in flight a send is *held back* until one finishes (``held_back``, ``max_hold_us``).
Locust's own statistics (web UI, console table, ``--csv``/``--html``) see every request too,
in whole milliseconds.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
from locust import User, events, task
from locust.exception import InterruptTaskSet, RescheduleTask, RescheduleTaskImmediately, StopTest, StopUser
from locust.runners import LocalRunner, MasterRunner, WorkerRunner
from tritonload.kinds import UserLoad, user_load
from tritonload.locust_stats import CSV_LAST_TURN_S, StatsFeed, stats_method
from tritonload.master import MasterReport
from tritonload.messages import feed_forever, report_forever, send_windows
from tritonload.options import TritonOptions, add_options
from tritonload.recording import Collector, Recorder
from tritonload.request_ids import RequestIds
from tritonload.run_clock import RunClock
from tritonload.shared import MESSAGE
from tritonload.state import ProcessState
from tritonload.web_guard import guard_web_ui
from tritonload.workers import WorkerFailed, fail_worker, init_distributed, worker_options

STATE = ProcessState()
"""This process's state: the one instance, each part handed to what needs it."""
LOCUST_FLOW = (StopUser, StopTest, InterruptTaskSet, RescheduleTask, RescheduleTaskImmediately)
"""Exceptions Locust itself uses to stop or reschedule a user: not failures."""
CLOCK = RunClock()
"""A headless run's ``--run-time``, from its first request (Locust's own counts from the spawn)."""


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    add_options(parser)


@events.quitting.add_listener
def _on_quitting_csv(environment: Any, **_: Any) -> None:
    # Locust rewrites its --csv files every second and only closes them at exit: one more
    # turn of its writer puts the final figures (the last flush, the workers' last reports) in.
    options = environment.parsed_options
    if (
        options is not None
        and getattr(options, "csv_prefix", None)
        and not isinstance(environment.runner, WorkerRunner)
    ):
        gevent.sleep(CSV_LAST_TURN_S)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    if STATE.collector is not None:
        CLOCK.start(environment, STATE.collector)
    if isinstance(environment.runner, MasterRunner):
        if STATE.collector is not None:
            STATE.collector.reset()
        return
    STATE.new_run()
    options = TritonOptions.from_parsed(environment.parsed_options)
    feed = StatsFeed(stats_method(options), options.model)
    recorder = STATE.recorder = Recorder(options.t0 or time.time(), options.window, feed)
    if options.trace_tag:
        STATE.request_ids = RequestIds(options.trace_tag, options.results)
    STATE.reporter = gevent.spawn(report_forever, environment, recorder, STATE.reported)
    STATE.feeder = gevent.spawn(feed_forever, environment, recorder)


@events.test_stopping.add_listener
def _on_test_stopping(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner) and STATE.collector is not None:
        STATE.collector.stopped = time.monotonic()  # the run's end (the workers stop after it)


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return  # the run's report: MasterReport, once the workers' last windows are in
    if STATE.reporter is not None:
        STATE.reporter.kill(block=False)
        STATE.reporter = None
    if STATE.feeder is not None:
        STATE.feeder.kill(block=False)
        STATE.feeder = None
    if STATE.engine is not None:
        STATE.engine.stop()
    if STATE.request_ids is not None:  # on the windows' own wall clock, so that both count the same requests
        STATE.request_ids.write(STATE.recorder.wall_offset if STATE.recorder is not None else None)
    STATE.shm.close()
    # Locust's statistics get the last requests at the same moment as the last windows
    # (nothing yields in between), before a worker's final report to the master.
    if STATE.recorder is not None:
        STATE.recorder.feed_stats(environment.stats)
        send_windows(environment, STATE.recorder, STATE.reported, everything=True)
    if isinstance(environment.runner, WorkerRunner):
        # Locust sends a worker's last statistics only on "quit"; a worker stopped first (see
        # tritonload.master.stop_workers) would never send them, so they go now, right behind
        # the last windows.
        send_stats = getattr(environment.runner, "_send_stats", None)
        if send_stats is not None:
            send_stats()


@events.init.add_listener
def _on_init(environment: Any, web_ui: Any = None, **_: Any) -> None:
    guard_web_ui(web_ui)
    runner = environment.runner
    if isinstance(runner, (MasterRunner, LocalRunner)) and not isinstance(runner, WorkerRunner):
        parsed = environment.parsed_options
        STATE.collector = Collector(parsed.triton_results, window_s=parsed.triton_window)
        runner.register_message(MESSAGE, STATE.collector.receive)
        STATE.report = MasterReport(STATE.collector)
        STATE.report.register(environment)  # after this file's listeners: last windows first
        CLOCK.take_over(environment)
    init_distributed(environment, STATE.collector, STATE.inputs_sender, STATE.inputs, STATE.reported)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    STATE.inputs.remove()


class TritonUser(User):
    """One user of the load's kind: a closed-loop stream of requests, an open-loop schedule, sequences."""

    user: UserLoad

    def on_start(self) -> None:
        """Prepare the requests and a connection; a failure is the run's one-line cause, not a silent user.

        Locust would log the exception and run on without this user, and the run would wait for
        its time cap; instead the reason is printed as a worker failure and Locust quits.
        """
        try:
            self._start()
        except WorkerFailed:
            raise
        except Exception as e:  # anything the user's data or the server's metadata provoke
            fail_worker(self.environment, f"a user cannot start: {type(e).__name__}: {e}")

    def _start(self) -> None:
        parsed = TritonOptions.from_parsed(self.environment.parsed_options)
        options = worker_options(self.environment, parsed, STATE.inputs)
        if not options.model:
            raise ValueError("--triton-model (or TRITONGEN_MODEL) is required")
        self.user = user_load(self.host or "127.0.0.1:8000", options, STATE, self.environment)

    @task
    def load(self) -> None:
        """Run until Locust stops this user; an exception is the run's one-line cause, and it ends.

        Locust would log the traceback and run the task again, and the run would go on to its
        time cap with this user failing over and over.
        """
        try:
            self.user.run()
        except (WorkerFailed, *LOCUST_FLOW):
            raise
        except Exception as e:  # a fault of the load generator or of its data, mid-run
            fail_worker(self.environment, f"a user failed: {type(e).__name__}: {e}")
