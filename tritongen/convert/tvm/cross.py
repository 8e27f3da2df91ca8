"""Which machine a TVM library is for: this one, or another reached by cross-compiling.

A target whose ``mtriple`` names another architecture (``--tvm-target aarch64``, ``rpi4``,
``rk3588``) is compiled by TVM's LLVM here and linked by Debian's cross gcc; the library
then runs only on a machine of that architecture, so it is neither tuned nor verified here.
Architectures are named as ``platform.machine()`` spells them on Linux (``x86_64``, ``aarch64``).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritongen.errors import ConversionError

ELF_MACHINES = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}
"""ELF ``e_machine`` values and the architectures they name."""

CROSS_TOOLCHAINS = {
    "aarch64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"),
    "arm": ("arm-linux-gnueabihf-gcc", "gcc-arm-linux-gnueabihf libc6-dev-armhf-cross"),
    "riscv64": ("riscv64-linux-gnu-gcc", "gcc-riscv64-linux-gnu libc6-dev-riscv64-cross"),
    "x86_64": ("x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu libc6-dev-amd64-cross"),
}
"""Per architecture: Debian's cross gcc and the packages that provide it and its C library."""

_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def normalise_arch(name: str) -> str:
    """One name per architecture: ``AMD64`` -> ``x86_64``, ``arm64`` -> ``aarch64``, ``armv7l`` -> ``arm``."""
    arch = name.strip().lower()
    arch = _ALIASES.get(arch, arch)
    if arch.startswith(("armv", "thumb")) or arch == "armhf":
        return "arm"
    if len(arch) == 4 and arch[0] == "i" and arch.endswith("86"):
        return "x86"
    return arch


def host_arch() -> str:
    """This machine's architecture, e.g. ``x86_64`` or ``aarch64``."""
    return normalise_arch(platform.machine())


def target_arch(spec: Mapping[str, Any]) -> str:
    """The architecture a TVM target dict compiles for: its ``mtriple``'s, else this machine's."""
    triple = spec.get("mtriple")
    if isinstance(triple, str) and triple.strip():
        return normalise_arch(triple.strip().split("-")[0])
    return host_arch()


def is_cross(spec: Mapping[str, Any]) -> bool:
    """Whether a target dict compiles for another architecture than this machine's."""
    return target_arch(spec) != host_arch()


def foreign_arch(facts: Mapping[str, Any]) -> str | None:
    """The architecture a TVM artifact's libraries are built for, when it is not this machine's.

    ``facts`` is the artifact's ``tvm_metadata.json``: its ``arch``, else its target's ``mtriple``.
    """
    arch = facts.get("arch")
    built = normalise_arch(arch) if isinstance(arch, str) and arch else target_arch(facts.get("target") or {})
    return None if built == host_arch() else built


def cross_toolchain_hint(arch: str) -> str:
    """How to install the cross toolchain for ``arch``."""
    if arch == "aarch64":
        return f"run `make cross-aarch64` (Debian's {CROSS_TOOLCHAINS['aarch64'][1]})"
    if arch in CROSS_TOOLCHAINS:
        return f"install Debian's {CROSS_TOOLCHAINS[arch][1]}"
    return f"build on a {arch} machine with --tvm-target llvm"


def cross_compiler(arch: str) -> str:
    """The path of the cross gcc that links libraries for ``arch`` on this machine.

    Raises:
        ConversionError: no cross gcc is known for ``arch``, or it is not on ``PATH``.
    """
    if arch not in CROSS_TOOLCHAINS:
        raise ConversionError(
            f"cannot cross-compile for {arch}: no cross toolchain known", cross_toolchain_hint(arch)
        )
    gcc = CROSS_TOOLCHAINS[arch][0]
    found = shutil.which(gcc)
    if found is None:
        raise ConversionError(f"cross-compiling for {arch} needs {gcc}", cross_toolchain_hint(arch))
    if not _has_c_library(found):
        raise ConversionError(
            f"cross-compiling for {arch} needs the {arch} C library beside {gcc}", cross_toolchain_hint(arch)
        )
    return found


def _has_c_library(gcc: str) -> bool:
    """Whether ``gcc`` finds its target's C start files (``crti.o``), which linking a library needs."""
    try:
        done = subprocess.run([gcc, "-print-file-name=crti.o"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return Path(done.stdout.strip()).is_absolute() and Path(done.stdout.strip()).is_file()


def elf_arch(path: Path | str) -> str | None:
    """The architecture an ELF file (a shared library) is built for; ``None`` when it is not ELF.

    Reads ``e_machine`` (offset 18) in the byte order ``EI_DATA`` (offset 5) gives; a machine
    not in :data:`ELF_MACHINES` comes back as ``e_machine <number>``.
    """
    with open(path, "rb") as f:
        header = f.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(header[18:20], "big" if header[5] == 2 else "little")
    return ELF_MACHINES.get(machine, f"e_machine {machine}")
