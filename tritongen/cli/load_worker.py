"""``tritongen loadtest --worker``: be a load worker of a ``loadtest --master`` elsewhere."""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

from tritongen.cli.boundary import stop_on_signals
from tritongen.cli.console import say
from tritongen.cli.options.load import RunFlags
from tritongen.errors import ConfigError
from tritongen.loadtest.distributed import WorkerArgs, check_wait, run_worker
from tritongen.loadtest.spec import parse_duration

WORKER_OPTIONS = ("worker", "master_host", "master_port", "worker_wait")
"""The ``RunFlags`` a worker takes; the master sends every load option."""


def option_name(field_name: str) -> str:
    """``master_host`` -> ``--master-host``."""
    return "--" + field_name.replace("_", "-")


def given_options(*groups: Any) -> list[str]:
    """The options of option-group instances set to something other than their defaults."""
    given = []
    for group in groups:
        for item in fields(group):
            if getattr(group, item.name) != item.default:
                given.append(option_name(item.name))
    return given


def run_worker_mode(model: str | None, run: RunFlags, others: list[str]) -> None:
    """Join each run of the master at ``--master-host`` until none appears for ``--worker-wait``.

    ``others`` are the load options the command was given besides ``run``'s (a worker takes none).

    Raises:
        ConfigError: a MODEL or a load option given, or no ``--master-host``.
        KeyboardInterrupt: Ctrl-C or SIGTERM (the Locust worker has told its master it quits).
    """
    if model is not None:
        raise ConfigError(
            f"--worker takes no MODEL ('{model}'): the master sends the model and every load option",
            "drop MODEL",
        )
    taken = [name for name in given_options(run) if name not in {option_name(o) for o in WORKER_OPTIONS}]
    if taken or others:
        raise ConfigError(
            f"--worker takes no load options ({', '.join(taken + others)}): the master sends them",
            "give them to `tritongen loadtest MODEL --master`",
        )
    if not run.master_host:
        raise ConfigError("--worker needs --master-host", "e.g. --worker --master-host 10.0.0.5")
    wait_s = parse_duration(run.worker_wait, "--worker-wait")
    check_wait(wait_s)

    with stop_on_signals() as stopping:
        run_worker(
            WorkerArgs(run.master_host, run.master_port), wait_s, functools.partial(say, err=True), stopping
        )
