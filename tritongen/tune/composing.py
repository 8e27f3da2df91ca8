"""Tuning a composing model: the config of one model is tuned while the load goes to another.

An ensemble has no batching or instances of its own: what can be tuned are its steps,
under the ensemble's traffic (``tune ENSEMBLE --composing STEP``). A BLS model's calls
cannot be read from its config, so any model of the repository is accepted under it, and
the baseline measurement tells whether the load reached it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError
from tritongen.metrics.composing import ensemble_steps, ensemble_tree
from tritongen.triton.config_text import ConfigSyntaxError, parse_model_config


def repository_config(repo: Path, model: str) -> dict[str, Any] | None:
    """``repo/model/config.pbtxt`` as JSON (protobuf field names), or ``None`` when missing or unreadable."""
    from google.protobuf import json_format

    path = repo / model / "config.pbtxt"
    try:
        message = parse_model_config(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ConfigSyntaxError):
        return None
    found: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return found


def composing_models(repo: Path, model: str) -> list[str]:
    """The models under ``model``'s ensemble steps in ``repo``, nested ensembles' steps included."""
    tree = ensemble_tree(model, lambda name: repository_config(repo, name))
    return [name for name in tree if name != model]


def tuned_model(repo: Path, model: str, composing: str | None) -> str:
    """The model whose config ``tune MODEL [--composing NAME]`` renders and reloads, checked.

    Raises:
        ConfigError: ``model`` is an ensemble and no ``--composing`` was given; NAME is not
            in ``repo``, is the model under load, is not a step of the ensemble, or is an
            ensemble itself.
    """
    config = repository_config(repo, model)
    steps = composing_models(repo, model)
    if composing is None:
        if ensemble_steps(config):
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
    if ensemble_steps(config) and composing not in steps:
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


def untouched_warning(result: dict[str, Any] | None, tuned: str, load_model: str) -> str | None:
    """Why to doubt a composing tune whose baseline load never reached the tuned model, else ``None``.

    ``result`` is the baseline's load-test JSON; a run without ``server_models`` (a server
    whose statistics were not read) proves nothing either way.
    """
    runs = [run for run in (result or {}).get("runs", []) if run.get("server_models")]
    if not runs or any(tuned in run["server_models"] for run in runs):
        return None
    return (
        f"the load on '{load_model}' did not reach '{tuned}' during the baseline measurement "
        f"(its statistics did not move): does '{load_model}' call it?"
    )
