"""Python-backend ``model.py`` files that serve artifacts on the embedded (local) server.

Each wrapper is copied into ``<model>/<version>/model.py`` together with
``tritongen_runtime.py`` (request batching shared by all wrappers). They stay
self-contained: in a container they run without tritongen installed.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

RUNTIME = "tritongen_runtime.py"


def write_wrapper(wrapper: str, version_dir: Path) -> list[str]:
    """Copy ``wrapper`` as ``model.py`` and the shared runtime into ``version_dir``; return the names."""
    package = resources.files(__name__)
    (version_dir / "model.py").write_text(
        package.joinpath(wrapper).read_text(encoding="utf-8"), encoding="utf-8"
    )
    (version_dir / RUNTIME).write_text(
        package.joinpath(RUNTIME).read_text(encoding="utf-8"), encoding="utf-8"
    )
    return ["model.py", RUNTIME]
