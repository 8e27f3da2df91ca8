"""Find the ``tritonserver`` binary, Python backend and stub shipped in the nvidia-pytriton wheel."""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tritongen.errors import MissingDependencyError

STUB_NAME = "triton_python_backend_stub"
"""The Python backend's stub executable: one process per model instance."""

INSTALL_HINT = "install it with `make install` (or `pip install nvidia-pytriton`)"


@dataclass(frozen=True)
class TritonDistribution:
    """Paths of the bundled Triton server for the running Python."""

    root: Path
    binary: Path
    python_backend: Path
    stub: Path
    libs: Path

    def library_path(self) -> str:
        """``LD_LIBRARY_PATH`` entries the server and the stub need (bundled libs, libpython)."""
        entries = [str(self.libs)]
        libdir = sysconfig.get_config_var("LIBDIR")
        if libdir:
            entries.append(str(libdir))
        return ":".join(entries)


def find_distribution(python_version: tuple[int, int] | None = None) -> TritonDistribution:
    """Locate the bundled server and the Python-backend stub for ``python_version``.

    Raises:
        MissingDependencyError: the wheel is not installed, incomplete, or has no stub
            for this Python version; the message says what to install.
    """
    major, minor = python_version or sys.version_info[:2]
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the embedded Triton server (nvidia-pytriton) is not installed", INSTALL_HINT
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    root = package / "tritonserver"
    binary = root / "bin" / "tritonserver"
    backend = root / "backends" / "python"
    if not binary.is_file() or not (backend / "libtriton_python.so").is_file():
        raise MissingDependencyError(
            f"the nvidia-pytriton wheel at {package} has no tritonserver binary or Python backend",
            "reinstall it: `pip install --force-reinstall nvidia-pytriton`",
        )
    stubs = root / "python_backend_stubs"
    stub = stubs / f"{major}.{minor}" / STUB_NAME
    if not stub.is_file():
        available = sorted(p.name for p in stubs.iterdir() if p.is_dir()) if stubs.is_dir() else []
        raise MissingDependencyError(
            f"the embedded Triton server has no Python-backend stub for Python {major}.{minor}",
            f"use a Python the wheel supports ({', '.join(available) or 'none found'}) for the venv",
        )
    libs = package.parent / "nvidia_pytriton.libs"
    return TritonDistribution(root=root, binary=binary, python_backend=backend, stub=stub, libs=libs)
