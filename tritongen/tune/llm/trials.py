"""The model's sibling that the trials reload: the model itself stays as it is, serving the baseline.

A copy of the model's directory (its weights hard-linked) named ``MODEL_tune`` is loaded beside
the model; each trial reloads it with the trial's engine settings as config parameters, which
restarts its engine (timed: the cost of a trial). The baseline and the finalist then run side
by side on the same server, so the confirmation's rounds interleave them without a restart.
The sibling is unloaded and removed at the end, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from tritongen.client.control import config_json
from tritongen.client.repository import RepositoryControl
from tritongen.errors import TritongenError
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.render import render_config
from tritongen.tune.llm.space import EngineCandidate

SIBLING_SUFFIX = "_tune"
RELOAD_TIMEOUT_S = 900.0


def _link_tree(source: Path, target: Path) -> None:
    """``source`` copied to ``target``, its files hard-linked where the file system allows."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


class Sibling:
    """The sibling model on a server: reloaded with one candidate's settings at a time."""

    def __init__(self, url: str, model_dir: Path, base: ModelConfig, admin_key: str | None = None) -> None:
        """The sibling of the model at ``model_dir`` (not created yet); ``base`` is the model's config."""
        self.name = model_dir.name + SIBLING_SUFFIX
        self.directory = model_dir.parent / self.name
        self.model_dir = model_dir
        self.base = base
        self.control = RepositoryControl(url, timeout_s=RELOAD_TIMEOUT_S, admin_key=admin_key)
        self.loaded: EngineCandidate | None = None

    def config(self, candidate: EngineCandidate) -> ModelConfig:
        """The model's config with ``candidate``'s settings, under the sibling's name."""
        parameters = {**self.base.parameters, **candidate.parameters()}
        return self.base.model_copy(update={"name": self.name, "parameters": parameters})

    def load(self, candidate: EngineCandidate) -> float:
        """Reload the sibling with ``candidate``; the seconds it took (the engine's restart).

        Raises:
            ModelLoadError: the engine did not start (the server's reason: the engine's last error).
        """
        started = time.perf_counter()
        self.loaded = None
        self.control.load(
            self.name, config_json(self.config(candidate)), refused_hint="the engine refused them"
        )
        self.loaded = candidate
        return time.perf_counter() - started

    @contextlib.contextmanager
    def present(self) -> Iterator[Sibling]:
        """The sibling's directory for the block, then the sibling unloaded and the directory removed."""
        if self.directory.exists():
            shutil.rmtree(self.directory)  # left by a tune that was killed
        _link_tree(self.model_dir, self.directory)
        config = self.directory / "config.pbtxt"
        config.unlink()  # a hard link to the model's own: replaced, never written through
        config.write_text(render_config(self.base.model_copy(update={"name": self.name})), encoding="utf-8")
        try:
            yield self
        finally:
            with contextlib.suppress(TritongenError):
                self.control.unload(self.name)
            shutil.rmtree(self.directory, ignore_errors=True)
