"""A tune on a server: which model, which server, the trials, the winner loaded before it is written.

The model tuned is MODEL, or with ``--composing`` a model MODEL's requests reach: an
ensemble has no batching or instances of its own, so what can be tuned are its steps, under
the ensemble's traffic (``tune ENSEMBLE --composing STEP``). A BLS model's calls cannot be
read from its config, so any model of the repository is accepted under it, and the baseline
measurement tells whether the load reached it.

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

from tritongen.client.control import ModelControl
from tritongen.errors import ConfigError, TritongenError
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.rerender import Rerender, model_target, plan_rerender, write_rerender
from tritongen.server.embedded import ServingHooks, embedded_server
from tritongen.triton.autofill import completed_note, server_completes
from tritongen.triton.ensembles import composing_models
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import CONFIG_FILE, config_from_served, read_config
from tritongen.tune.report import TuneReport
from tritongen.tune.request import TuneRequest, check_claim
from tritongen.tune.runner import ServerGoneError, TuneHooks, run_tune
from tritongen.tune.space import Candidate
from tritongen.workflows.serving import aimed_at, aimed_at_url

Started = Callable[[TuneRequest, str | None], None]
"""Told the request made around the model's config, and why the server's config was used if it was."""
TrialsContext = Callable[[], AbstractContextManager[TuneHooks]]
"""Entered once the server is up, around the trials and the apply: yields whom the trials tell,
and the event that stops them (as Ctrl-C does)."""


@dataclass(frozen=True)
class TuneSession:
    """Where a tune runs, and what becomes of its winner."""

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
    load_timeout_s: float | None = None
    """How long the embedded server's start and loads may take (None: derived from the model count)."""


@dataclass(frozen=True)
class SessionHooks:
    """Whom a tune session tells as it goes (each optional)."""

    serving: ServingHooks = field(default_factory=ServingHooks)
    """Told while the embedded server starts: the lint findings, the wait."""
    trials: TrialsContext | None = None
    on_start: Started | None = None
    """Told the request made around the model's config, before any trial."""


@dataclass(frozen=True)
class TuneOutcome:
    """The tune's report, and what ``apply`` did with its winner."""

    report: TuneReport
    config_path: Path
    """The model's config.pbtxt (which ``apply`` writes)."""
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
    request: TuneRequest, repo: Path, session: TuneSession, hooks: SessionHooks | None = None
) -> TuneOutcome:
    """Tune a model of ``repo`` on the server ``session`` names; its config is restored afterwards.

    With ``session.apply`` the winner is written where it beat the current config.

    ``request``'s space is made around the model's config: its config.pbtxt, read first, or
    where the server completes the config, the one the tune's server reports.

    Raises:
        TuneInterrupted: Ctrl-C or the stop event during the trials.
        TritongenError: the model or its config cannot be tuned, the server cannot start or
            went away, or the settings cannot work (see :func:`~tritongen.tune.runner.run_tune`).
    """
    hooks = hooks or SessionHooks()
    load_model = request.load.model
    tuned_model(repo, load_model, request.model if request.model != load_model else None)
    model_dir = repo / request.model
    why = server_completes(model_dir)
    start = None
    if why is None:
        start = _started(request, read_config(model_dir / CONFIG_FILE), note=None, hooks=hooks)
    admin_key = session.admin_key if session.url is not None else None
    trials = hooks.trials() if hooks.trials is not None else contextlib.nullcontext(TuneHooks())
    with _server(request, repo, session, hooks.serving) as (control_url, load), trials as trial_hooks:
        control = ModelControl(control_url, request.model, admin_key=admin_key)
        try:
            if start is None:
                served = config_from_served(
                    control.loaded_config(), f"the config the server reports for '{request.model}'"
                )
                start = _started(request, served, note=completed_note(served, str(why)), hooks=hooks)
            tuned, base = start
            report = run_tune(replace(tuned, load=load), control, base, model_target(model_dir), trial_hooks)
            return _apply(report, model_dir, session, base, control)
        except KeyboardInterrupt as e:
            raise TuneInterrupted(request.out_dir) from e
        finally:
            control.close()


def tuned_model(repo: Path, model: str, composing: str | None) -> str:
    """The model whose config ``tune MODEL [--composing NAME]`` renders and reloads, checked.

    Raises:
        ConfigError: ``model`` is an ensemble and no ``--composing`` was given; NAME is not
            in ``repo``, is the model under load, is not a step of the ensemble, or is an
            ensemble itself.
    """
    steps = composing_models(repo, model)  # an ensemble's (other models have none)
    if composing is None:
        if steps:
            raise ConfigError(
                f"'{model}' is an ensemble: it has no batching or instances of its own to tune",
                f"tune one of its steps under its load: --composing {' | '.join(steps)}",
            )
        return model
    if composing == model:
        raise ConfigError(f"--composing {composing} is the model under load itself", "drop --composing")
    if not (repo / composing).is_dir():
        raise ConfigError(
            f"--composing {composing}: there is no model '{composing}' in {repo}",
            "name a model directory of --repo" + (f": one of {', '.join(steps)}" if steps else ""),
        )
    if steps and composing not in steps:
        raise ConfigError(
            f"--composing {composing}: '{composing}' is not a step of the ensemble '{model}'",
            f"name one of its steps: {', '.join(steps)}",
        )
    inner = composing_models(repo, composing)
    if inner:
        raise ConfigError(
            f"--composing {composing}: '{composing}' is an ensemble, with no batching or instances to tune",
            f"name one of its steps: {', '.join(inner)}",
        )
    return composing


def _started(
    request: TuneRequest, base: ModelConfig, note: str | None, hooks: SessionHooks
) -> tuple[TuneRequest, ModelConfig]:
    """The request made around ``base``, its directory checked, and told to ``hooks`` (with ``note``).

    Raises:
        ConfigError: the settings do not fit the model, or the directory holds another tune.
    """
    tuned = request.around(base)
    check_claim(tuned)
    if hooks.on_start is not None:
        hooks.on_start(tuned, note)
    return tuned, base


def _apply(
    report: TuneReport, model_dir: Path, session: TuneSession, base: ModelConfig, control: ModelControl
) -> TuneOutcome:
    """The winner's config planned and (unless ``diff``) loaded on the server, then written; or the refusal.

    The server loads the new config first: where it refuses, nothing is written.
    """
    config_path = model_dir / CONFIG_FILE
    winner = report.winner
    if not session.apply or winner is None or not isinstance(winner.candidate, Candidate):
        return TuneOutcome(report, config_path)
    try:
        applied = plan_rerender(model_dir, winner.candidate.to_options(), base=base)
        if not session.diff:
            control.load(applied.config)
            write_rerender(applied)
    except TritongenError as e:
        return TuneOutcome(report, config_path, refusal=e)
    return TuneOutcome(report, config_path, applied=applied)


@contextlib.contextmanager
def _server(
    request: TuneRequest, repo: Path, session: TuneSession, hooks: ServingHooks
) -> Iterator[tuple[str, LoadSpec]]:
    """The server's HTTP address (for model control) and the load aimed at it, for the length of the tune."""
    spec = request.load
    if session.url is not None:
        yield session.url, aimed_at_url(spec, session.url)
        return
    # The model under load, and the composing model tuned (a model called through BLS is not
    # loaded with its caller, as an ensemble's steps are).
    others = [request.model] if request.model != spec.model else []
    others += list(request.background.models if request.background else ())
    served = [spec.model, *others]
    with embedded_server(repo, served, hooks, session.skip_failed, session.load_timeout_s) as server:
        try:
            yield server.http_url, aimed_at(spec, server)
        except ServerGoneError as e:  # the embedded server died: its log says why
            raise ServerGoneError(e.url, e.key, e.out_dir, server.log_path) from e
