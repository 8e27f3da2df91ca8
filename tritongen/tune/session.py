"""A tune on a server: which server, the trials under a stop event, the winner loaded before it is written.

The trials run on the server at ``url`` (in explicit model-control mode) or on the embedded
server started on the repository with the tuned model, the model under load and the
background models. Whatever happens, the model goes back to the config it had
(:func:`~tritongen.tune.runner.run_tune`). With ``apply``, the winner is planned as an edit of
the model's config.pbtxt, loaded on the server, and only then written; a refusal is
returned, not raised, so that the report is still shown and saved.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritongen.client.address import ServerAddress
from tritongen.client.control import ModelControl
from tritongen.errors import TritongenError
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.rerender import Rerender, model_target, plan_rerender, write_rerender
from tritongen.server.embedded import ServingHooks, embedded_server
from tritongen.triton.model_config import ModelConfig
from tritongen.tune.runner import ServerGoneError, TuneHooks, TuneReport, TuneRequest, run_tune
from tritongen.tune.space import Candidate

TrialsContext = Callable[[], AbstractContextManager[TuneHooks]]
"""Entered once the server is up, around the trials and the apply: yields whom the trials tell,
and the event that stops them (as Ctrl-C does)."""


@dataclass(frozen=True)
class TuneSession:
    """Where a tune runs, and what becomes of its winner."""

    repo: Path
    """The model repository holding the tuned model (and the one the embedded server serves)."""
    url: str | None = None
    """A running server in explicit model-control mode (HTTP ``host:port``); None: the embedded one."""
    admin_key: str | None = None
    """Key of the ``url`` server's restricted repository API."""
    apply: bool = False
    """Load the winner on the server and write it into the repository, where it beat the current config."""
    diff: bool = False
    """With ``apply``: only plan the winner's change; nothing is loaded or written."""
    skip_failed: bool = False
    """The embedded server serves the whole repository, less the models that fail to load."""


@dataclass(frozen=True)
class SessionHooks:
    """Whom a tune session tells as it goes (each optional)."""

    serving: ServingHooks = field(default_factory=ServingHooks)
    """Told while the embedded server starts: the lint findings, the wait."""
    trials: TrialsContext | None = None


@dataclass(frozen=True)
class TuneOutcome:
    """The tune's report, and what ``apply`` did with its winner."""

    report: TuneReport
    applied: Rerender | None = None
    """The winner's change: planned, and (without ``diff``) loaded and written. None: nothing to apply."""
    refusal: TritongenError | None = None
    """Why the winner was not applied (the rules or the server refused it); nothing was written."""


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C or the stop event during the trials: the model is back on its config, what was measured kept."""

    def __init__(self, out_dir: Path) -> None:
        """The tune directory holding what was measured."""
        super().__init__(str(out_dir))
        self.out_dir = out_dir


def run_session(
    request: TuneRequest, session: TuneSession, base: ModelConfig, hooks: SessionHooks | None = None
) -> TuneOutcome:
    """Tune on the server ``session`` names, restore the model's config, and apply the winner if asked.

    Raises:
        TuneInterrupted: Ctrl-C or the stop event during the trials.
        TritongenError: the server cannot start or went away, or the settings cannot work
            (see :func:`~tritongen.tune.runner.run_tune`).
    """
    hooks = hooks or SessionHooks()
    admin_key = session.admin_key if session.url is not None else None
    trials = hooks.trials() if hooks.trials is not None else contextlib.nullcontext(TuneHooks())
    with _server(request, session, hooks.serving) as (control_url, load), trials as trial_hooks:
        control = ModelControl(control_url, request.model, admin_key=admin_key)
        try:
            target = model_target(session.repo / request.model)
            report = run_tune(replace(request, load=load), control, base, target, trial_hooks)
            return _apply(report, session, base, control)
        except KeyboardInterrupt as e:
            raise TuneInterrupted(request.out_dir) from e
        finally:
            control.close()


def _apply(report: TuneReport, session: TuneSession, base: ModelConfig, control: ModelControl) -> TuneOutcome:
    """The winner's config planned and (unless ``diff``) loaded on the server, then written; or the refusal.

    The server loads the new config first: where it refuses, nothing is written.
    """
    winner = report.winner
    if not session.apply or winner is None or not isinstance(winner.candidate, Candidate):
        return TuneOutcome(report)
    try:
        applied = plan_rerender(session.repo / report.request.model, winner.candidate.to_options(), base=base)
        if not session.diff:
            control.load(applied.config)
            write_rerender(applied)
    except TritongenError as e:
        return TuneOutcome(report, refusal=e)
    return TuneOutcome(report, applied=applied)


@contextlib.contextmanager
def _server(
    request: TuneRequest, session: TuneSession, serving: ServingHooks
) -> Iterator[tuple[str, LoadSpec]]:
    """The server's HTTP address (for model control) and the load aimed at it, for the length of the tune."""
    spec = request.load
    if session.url is not None:
        url = session.url
        address = ServerAddress.parse(url, "http", spec.address.given_metrics_url)
        yield (
            url,
            replace(spec, address=address.beside(spec.protocol) if spec.protocol == "grpc" else address),
        )
        return
    # The model under load, and the composing model tuned (a model called through BLS is not
    # loaded with its caller, as an ensemble's steps are).
    others = [request.model] if request.model != spec.model else []
    others += list(request.background.models if request.background else ())
    with embedded_server(
        session.repo, [spec.model, *others], serving, skip_failed=session.skip_failed
    ) as server:
        target = server.http_url if spec.protocol == "http" else server.grpc_url
        try:
            address = ServerAddress.parse(target, spec.protocol, server.metrics_url)
            yield server.http_url, replace(spec, address=address)
        except ServerGoneError as e:  # the embedded server died: its log says why
            raise ServerGoneError(e.url, e.key, e.out_dir, server.log_path) from e
