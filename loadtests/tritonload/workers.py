"""Distributed runs: lost workers, the master's request data for remote workers, a silent master.

On a master: a line (and a :class:`~.shared.LostLine` in ``--triton-results``) for each
worker Locust loses and each one that comes back, and the ``--triton-inputs`` file sent to a
worker that lacks it (messages ``INPUTS_REQUEST``/``INPUTS_REPLY``). On a worker: the master's
data written to a local file, one line (``WORKER_FAILURE``) when it cannot load, one when it
has joined, and a quit when the master has been silent too long (``MASTER_SILENT_ENV``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any

import gevent
import gevent.event
import gevent.lock
from locust.runners import MasterRunner, WorkerRunner

from .messages import WorkerTotal
from .options import TritonOptions
from .recording import Collector
from .shared import MASTER_SILENT_ENV, WORKER_FAILURE, WORKER_JOINED, LostLine

INPUTS_REQUEST = "tritongen_inputs_request"
"""A worker without the master's ``--triton-inputs`` file at the same path asks the master for it."""
INPUTS_REPLY = "tritongen_inputs"
INPUTS_WAIT_S = 30.0
"""How long a worker waits for the master's request data."""
WATCH_WORKERS_S = 0.5
MASTER_SILENT_DEFAULT_S = 60.0
"""How long a worker waits on a silent master unless ``MASTER_SILENT_ENV`` says otherwise (Locust's limit)."""
MAX_INPUTS_BYTES = 64 * 2**20
"""A master sends its request data to workers up to this size (beyond it, copy the file to each)."""


@dataclass
class WorkerWatch:
    """On a master: the workers seen during the test, and those written as lost (and not back)."""

    seen: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)

    def changes(self, present: set[str], missing: set[str], running: bool) -> list[tuple[str, bool]]:
        """``(worker, lost)`` for each worker lost (True) or back (False) since the last look.

        A missing worker (no heartbeat for a few seconds) is lost whatever the test's state: when
        the last one goes missing, Locust stops the test in the same tick. A worker gone from the
        clients quit, which counts only while the test runs (at its end every worker quits). A
        lost worker whose heartbeats resume is back.
        """
        self.seen |= present | missing
        gone = self.seen - present - missing
        newly = (missing | (gone if running else set())) - self.lost
        back = present & self.lost
        self.lost = (self.lost | newly) - back
        return sorted([(worker, True) for worker in newly] + [(worker, False) for worker in back])


def watch_workers(environment: Any, path: str, collector: Collector | None) -> None:
    """On a master: write a line for each worker Locust loses, and for each one that comes back."""
    from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING

    watch = WorkerWatch()
    while True:
        gevent.sleep(WATCH_WORKERS_S)
        runner = environment.runner
        clients = list(runner.clients.all)
        present = {str(c.id) for c in clients if c.state != STATE_MISSING}
        missing = {str(c.id) for c in clients if c.state == STATE_MISSING}
        running = runner.state in (STATE_RUNNING, STATE_SPAWNING)
        for worker, lost in watch.changes(present, missing, running):
            if collector is not None:
                collector.note_lost(worker, lost)
            said = f"tritongen: lost worker {worker}" if lost else f"tritongen: worker {worker} is back"
            print(said, flush=True)
            if path:
                with open(path, "a") as out:
                    out.write(json.dumps(LostLine(worker=worker, lost=lost, at=time.time())) + "\n")


def read_inputs(path: str, limit: int = MAX_INPUTS_BYTES) -> dict[str, str]:
    """A master's reply to a worker without its request data: the file's bytes in base64, or why not."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            mib, limit_mib = size / 2**20, limit / 2**20
            return {
                "data": "",
                "error": f"--triton-inputs {path} is {mib:.0f} MiB, more than the {limit_mib:.0f} MiB a "
                "master sends its workers: copy the file to the same path on each worker",
            }
        with open(path, "rb") as data:
            return {"data": base64.b64encode(data.read()).decode(), "error": ""}
    except OSError as e:
        return {"data": "", "error": f"the master cannot read --triton-inputs {path}: {e.strerror}"}
    except Exception as e:  # whatever it is, the worker says it in its one line
        return {"data": "", "error": f"the master cannot send --triton-inputs {path}: {e}"}


@dataclass
class InputsSender:
    """On a master: its ``--triton-inputs`` file read and encoded once, in a thread, for every worker."""

    reply: dict[str, str] | None = None
    lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)

    def send(self, environment: Any, msg: Any, **_: Any) -> None:
        """Send a connected worker this master's ``--triton-inputs`` file (never another path)."""
        runner = environment.runner
        if msg.node_id not in runner.clients:
            return
        with self.lock:
            if self.reply is None:
                path = environment.parsed_options.triton_inputs
                self.reply = gevent.get_hub().threadpool.apply(read_inputs, (path,))
        runner.send_message(INPUTS_REPLY, self.reply, client_id=msg.node_id)


@dataclass
class InputsCopy:
    """On a worker: the master's request data, written to a file of this machine."""

    event: gevent.event.Event = field(default_factory=gevent.event.Event)
    path: str = ""
    error: str = ""
    requested: bool = False

    def receive(self, environment: Any, msg: Any, **_: Any) -> None:
        """Keep the master's reply: the file's bytes, or why it could not send them."""
        self.error = str(msg.data.get("error", ""))
        if not self.error:
            handle, self.path = tempfile.mkstemp(prefix="tritongen-inputs-", suffix=".npz")
            with os.fdopen(handle, "wb") as out:
                out.write(base64.b64decode(msg.data["data"]))
        self.event.set()

    def remove(self) -> None:
        """Delete the local copy."""
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class WorkerFailed(RuntimeError):
    """Raised by :func:`fail_worker` once it has said why: the failure is reported already."""


def fail_worker(environment: Any, reason: str) -> None:
    """Say in one line why this worker cannot load, and quit (the master notes the worker as lost).

    Raises:
        WorkerFailed: Always, to stop the user that found the problem.
    """
    print(WORKER_FAILURE + reason, flush=True)
    environment.process_exit_code = 3
    gevent.spawn(environment.runner.quit)
    raise WorkerFailed(reason)


def worker_options(environment: Any, options: TritonOptions, inputs: InputsCopy) -> TritonOptions:
    """The options of a user: on a remote worker, ``--triton-inputs`` becomes the master's data.

    A worker on the master's machine (``--processes``) reads the file in place; another one
    asks the master for it once (``inputs`` keeps the copy), so data files need to exist only
    where the master runs.
    """
    runner = environment.runner
    if not isinstance(runner, WorkerRunner) or not options.inputs or os.path.exists(options.inputs):
        return options
    if not inputs.requested:
        inputs.requested = True
        runner.send_message(INPUTS_REQUEST, {})
    if not inputs.event.wait(timeout=INPUTS_WAIT_S):
        fail_worker(environment, f"the master sent no request data within {INPUTS_WAIT_S:.0f} s")
    if inputs.error:
        fail_worker(environment, inputs.error)
    return replace(options, inputs=inputs.path)


def watch_master(environment: Any) -> None:
    """On a worker: say once the master has answered; quit when it has been silent too long (it is gone).

    tritongen starts a fresh master per run; a worker still bound to the last one would wait
    a minute (Locust's own limit) before it could join the next (see ``MASTER_SILENT_ENV``).
    """
    silent_s = float(os.environ.get(MASTER_SILENT_ENV) or MASTER_SILENT_DEFAULT_S)
    started = time.time()
    joined = False
    while True:
        gevent.sleep(0.5)
        runner = environment.runner
        last = getattr(runner, "last_heartbeat_timestamp", None)
        if last and not joined:
            joined = True
            print(WORKER_JOINED, flush=True)
        if time.time() - (last or started) > silent_s:
            print(f"tritongen: no heartbeat from the master for {silent_s:.0f} s", flush=True)
            runner.quit()
            return


def init_distributed(
    environment: Any,
    collector: Collector | None,
    sender: InputsSender,
    inputs: InputsCopy,
    total: WorkerTotal,
) -> None:
    """Register the messages and watchers of a master or a worker (nothing for a local runner).

    A master answers requests for its data with ``sender`` and notes lost workers in
    ``collector``; a worker keeps the master's data in ``inputs`` and prints ``total`` when it quits.
    """
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.register_message(INPUTS_REQUEST, sender.send, concurrent=True)
        gevent.spawn(watch_workers, environment, environment.parsed_options.triton_results, collector)
    elif isinstance(runner, WorkerRunner):
        runner.register_message(INPUTS_REPLY, inputs.receive)
        environment.events.quitting.add_listener(total.say)
        gevent.spawn(watch_master, environment)
