"""Fill ``.whl/`` with the wheels a GPU host that has PyTorch but not tritongen needs.

The GPU host this targets (Python 3.12, x86-64, CUDA 13, no network) already holds torch,
numpy, onnx, onnxruntime, transformers, typer, rich, protobuf and the other packages of
:data:`DEVICE_PACKAGES`. What it lacks travels as wheels: the embedded Triton server
(``nvidia-pytriton``, repacked without what a Python 3.12 host never loads), the Triton
client, Locust with its gevent stack, pydantic, hdrhistogram, and a wheel of tritongen
built from this working tree. Each package is pinned to the version installed here, one
version each. The script checks that the working tree plus ``.whl`` stays under the
64 MiB a call may carry and prints the command that runs ``bench/gpu_check.py`` there.

Usage: ``make gpu-wheels`` (or ``.venv/bin/python bench/gpu_wheels.py [--dir .whl]``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 64 * 1024 * 1024
SOURCE_NOTE = "tritongen-source.json"
"""Beside the wheels: the commit the tritongen wheel was built from (bench/gpu_check.py reads it)."""
DEVICE_PYTHON = "3.12"

# Packages the GPU host's Python already holds (read from its image's package list).
_DEVICE_LIST = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cmake colorama contourpy coverage cuda-bindings
cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils
execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet
httpcore httpx humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx
onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
"""
DEVICE_PACKAGES = frozenset(canonicalize_name(n) for n in _DEVICE_LIST.split())

# What tritongen's GPU check runs: the embedded server, the client, Locust (load runs),
# pydantic (typed settings), hdrhistogram (latency histograms) and the command line.
ROOTS = ("nvidia-pytriton", "tritonclient", "locust", "pydantic", "hdrhistogram", "typer", "click", "rich")
# Only the server binaries of nvidia-pytriton are used, never its Python package.
NO_DEPS_OF = frozenset({"nvidia-pytriton"})
# Carried although the host has them: pydantic needs a newer typing-extensions (whose newer
# releases only add names), and tritongen's command line needs typer, click and rich releases
# the host's (of unknown versions) may predate; all pure Python, so nothing else breaks.
NEWER_THAN_HOST = frozenset({"typing-extensions", "typer", "click", "rich"})
# Carrying these would shadow the host's build (CUDA wheels, numpy 2): never carried.
NEVER_CARRY = frozenset(canonicalize_name(n) for n in ("numpy", "torch", "protobuf", "onnxruntime", "onnx"))


# tritongen's requirements that the GPU check never uses there: the host's onnxruntime
# serves ONNX, and TVM (with its cost model) is not part of the check.
NOT_NEEDED = frozenset({"onnxruntime-gpu", "apache-tvm", "apache-tvm-ffi", "xgboost-cpu"})

PLATFORMS = (
    *(f"manylinux_2_{n}_x86_64" for n in (35, 34, 31, 28, 27, 24, 17)),
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)

Requires = Callable[[str], list[str]]


def plan_packages(
    requires: Requires,
    roots: Iterable[str] = ROOTS,
    device: frozenset[str] = DEVICE_PACKAGES,
    python: str = DEVICE_PYTHON,
) -> list[str]:
    """The canonical names to carry: ``roots`` and what they need, less what the host has.

    ``requires(name)`` gives a package's ``Requires-Dist`` lines; markers are evaluated for
    Linux x86-64 CPython ``python``, and an extra named in a requirement (``pkg[client]``)
    brings that extra's requirements.
    """
    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    env |= {"python_version": python, "python_full_version": f"{python}.0"}
    env |= {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}
    env |= {"implementation_name": "cpython", "platform_python_implementation": "CPython"}
    carried: list[str] = []
    pending: list[tuple[str, frozenset[str]]] = [(canonicalize_name(r), frozenset()) for r in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop(0)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name in NEVER_CARRY or (name in device and name not in NEWER_THAN_HOST):
            continue
        if name not in carried:
            carried.append(name)
        if name in NO_DEPS_OF:
            continue
        for line in requires(name):
            req = Requirement(line)
            wanted = any(
                req.marker is None or req.marker.evaluate({**env, "extra": extra})
                for extra in (extras or {""})
            )
            if wanted:
                pending.append((canonicalize_name(req.name), frozenset(req.extras)))
    for name in NEWER_THAN_HOST:
        if name not in carried and any(_needs(requires(c), name) for c in carried):
            carried.append(name)
    return carried


def _needs(lines: list[str], name: str) -> bool:
    return any(canonicalize_name(Requirement(line).name) == name for line in lines)


def unplanned(requires: Requires, plan: list[str], device: frozenset[str] = DEVICE_PACKAGES) -> list[str]:
    """The requirements of tritongen that the host lacks, ``plan`` does not carry and the check needs."""
    names: list[str] = []
    for line in requires("tritongen"):
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        name = canonicalize_name(req.name)
        if name not in device and name not in plan and name not in NOT_NEEDED:
            names.append(name)
    return names


def installed_requires(name: str) -> list[str]:
    """``Requires-Dist`` lines of the installed distribution ``name``."""
    return list(metadata.distribution(name).requires or [])


def keep_member(
    member: str, python: str = DEVICE_PYTHON, bundled_needed: frozenset[str] | None = None
) -> bool:
    """Whether the nvidia-pytriton wheel member ``member`` is needed on a ``python`` host.

    Dropped: the Python-backend stubs of other Python versions, and the bundled libpython
    builds that no kept binary needs (``bundled_needed``: the closure of the ELF ``NEEDED``
    entries of the server, its Python backend and the kept stub; ``None`` keeps them all).
    Every other library stays, since the server may ``dlopen`` it.
    """
    stub = re.match(r"pytriton/tritonserver/python_backend_stubs/(\d+\.\d+)/", member)
    if stub is not None:
        return stub.group(1) == python
    lib = re.match(r"nvidia_pytriton\.libs/(libpython[^/]*)$", member)
    if lib is not None and bundled_needed is not None:
        return lib.group(1) in bundled_needed
    return True


def needed_closure(roots: Iterable[str], needed: Mapping[str, list[str]]) -> frozenset[str]:
    """Every library reachable from ``roots`` through ``needed`` (file -> its ELF NEEDED names)."""
    reached: set[str] = set()
    stack = [lib for root in roots for lib in needed.get(root, [])]
    while stack:
        lib = stack.pop()
        if lib not in reached:
            reached.add(lib)
            stack.extend(needed.get(lib, []))
    return frozenset(reached)


def _elf_needed(path: Path) -> list[str]:
    out = subprocess.run(
        ["readelf", "-d", str(path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def repack_pytriton(wheel: Path, python: str = DEVICE_PYTHON) -> tuple[int, list[str]]:
    """Rewrite ``wheel`` in place without the members :func:`keep_member` drops; RECORD kept true.

    Returns the bytes saved and the dropped members.
    """
    with tempfile.TemporaryDirectory(prefix="gpu-wheels-") as tmp, zipfile.ZipFile(wheel) as src:
        names = src.namelist()
        stub = f"pytriton/tritonserver/python_backend_stubs/{python}/triton_python_backend_stub"
        roots = [
            "pytriton/tritonserver/bin/tritonserver",
            "pytriton/tritonserver/backends/python/libtriton_python.so",
            stub,
        ]
        libs = [n for n in names if n.startswith("nvidia_pytriton.libs/") and not n.endswith("/")]
        src.extractall(tmp, members=[*roots, *libs])
        needed = {Path(n).name if n in libs else n: _elf_needed(Path(tmp) / n) for n in [*roots, *libs]}
        closure = needed_closure(roots, needed)
        dropped = [n for n in names if not keep_member(n, python, closure)]
        out = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                if info.filename in dropped:
                    continue
                data = src.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = _filtered_record(data, set(dropped))
                dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    before = wheel.stat().st_size
    out.replace(wheel)
    return before - wheel.stat().st_size, dropped


def _filtered_record(record: bytes, dropped: set[str]) -> bytes:
    lines = [line for line in record.decode().splitlines() if line.split(",", 1)[0] not in dropped]
    return ("\n".join(lines) + "\n").encode()


def travelling_files(root: Path = ROOT) -> list[Path]:
    """Tracked and untracked-not-ignored files of the working tree: what a call sends."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return [root / p for p in out.split("\0") if p]


def travel_bytes(files: Iterable[Path], carried: Iterable[Path]) -> int:
    """Bytes that travel: the working tree's files (those that exist) plus the carried ones."""
    return sum(p.stat().st_size for p in [*files, *carried] if p.is_file() and not p.is_symlink())


def _download(names: list[str], dest: Path) -> None:
    pins = [f"{n}=={metadata.version(n)}" for n in names]
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", DEVICE_PYTHON, "--implementation", "cp", *platforms, "-d", str(dest), *pins]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    noise = "WARNING: Location "  # the local indexes that do not hold a package
    print("\n".join(line for line in done.stderr.splitlines() if not line.startswith(noise)), end="")
    if done.returncode != 0:
        raise SystemExit(f"gpu-wheels: pip download failed (exit {done.returncode}); see above")


def _build_tritongen(dest: Path) -> Path:
    """Build tritongen's wheel from a copy of the working tree (what travels, nothing ignored)."""
    with tempfile.TemporaryDirectory(prefix="gpu-wheels-src-") as tmp:
        for path in travelling_files():
            target = Path(tmp) / path.relative_to(ROOT)
            if path.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        subprocess.run([*cmd, "-w", str(dest), tmp], check=True, timeout=600)
    return next(dest.glob("tritongen-*.whl"))


SOURCE_DIRS = ("tritongen", "templates", "loadtests")
"""What the tritongen wheel is built from (``pyproject.toml`` maps the last two into the package)."""


def source_hash(root: Path) -> str:
    """SHA-256 over the paths and contents of the files the tritongen wheel is built from.

    bench/gpu_check.py compares it with the tree it runs in: a wheel built before a change
    would otherwise be tested instead of the change.
    """
    import hashlib

    digest = hashlib.sha256()
    for folder in SOURCE_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _write_source_note(path: Path) -> None:
    """Record the commit (and whether the tree had changes) the tritongen wheel was built from."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    note = {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "source_sha256": source_hash(ROOT),
    }
    path.write_text(json.dumps(note) + "\n", encoding="utf-8")


def _wheel_name(path: Path) -> str:
    return canonicalize_name(path.name.split("-", 1)[0])


def prepare(dest: Path) -> list[Path]:
    """Fill ``dest`` with one wheel per planned package plus tritongen; return the wheels."""
    names = plan_packages(installed_requires)
    for name in unplanned(installed_requires, names):
        print(f"warning: tritongen requires {name}, which the GPU host lacks and ROOTS does not carry")
    dest.mkdir(exist_ok=True)
    for old in dest.glob("*.whl"):
        if _wheel_name(old) not in names or old.name.startswith("tritongen-"):
            old.unlink()
    have = {_wheel_name(p) for p in dest.glob("*.whl")}
    # A repacked nvidia-pytriton stays as it is; download only what is missing.
    missing = [n for n in names if n not in have]
    if missing:
        _download(missing, dest)
    for wheel in dest.glob("nvidia_pytriton-*.whl"):
        saved, dropped = repack_pytriton(wheel)  # nothing to drop once repacked
        if dropped:
            print(f"repacked {wheel.name}: {len(dropped)} members dropped, {saved / 2**20:.1f} MiB saved")
    _build_tritongen(dest)
    _write_source_note(dest / SOURCE_NOTE)
    wheels = sorted(dest.glob("*.whl"))
    counts: dict[str, int] = {}
    for w in wheels:
        counts[_wheel_name(w)] = counts.get(_wheel_name(w), 0) + 1
    if twice := [n for n, c in counts.items() if c > 1]:
        raise SystemExit(
            f"gpu-wheels: two versions of {', '.join(twice)} in {dest}: remove {dest} and run again"
        )
    return wheels


def device_command(dest: str = ".whl") -> str:
    """The one command that runs the GPU check on the device, from the repository's root."""
    return f"PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --install {dest} --out $OUT"


def main(argv: list[str] | None = None) -> int:
    """Prepare the wheels, check what would travel, print the device command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", type=Path, default=ROOT / ".whl", help="where the wheels go (default .whl)")
    args = parser.parse_args(argv)
    dest: Path = args.dir.resolve()
    wheels = prepare(dest)
    for wheel in wheels:
        print(f"  {wheel.stat().st_size / 2**20:6.1f} MiB  {wheel.name}")
    tree = travel_bytes(travelling_files(), [])
    total = tree + travel_bytes([], sorted(dest.iterdir()))
    print(f"travels: {total / 2**20:.1f} MiB (working tree {tree / 2**20:.1f} MiB + {len(wheels)} wheels)")
    if total >= LIMIT_BYTES:
        print(f"gpu-wheels: {total / 2**20:.1f} MiB would travel, over the 64 MiB limit", file=sys.stderr)
        return 1
    rel = dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest
    print(f"device command (carry {rel}, timeout_s 420):")
    print(f"  {device_command(str(rel))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
