"""bench/gpu_check.py and bench/gpu_wheels.py: no-GPU refusal, the CPU dry run, the wheel plan."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from support.gpus import host_gpu_skip_reason
from support.paths import ROOT


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


gpu_check = _load("gpu_check")


gpu_wheels = _load("gpu_wheels")


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2_at_once() -> None:
    if host_gpu_skip_reason() is None:
        pytest.skip("this host has an NVIDIA GPU")
    # At once: a check that went on to its steps would run for minutes, past this timeout.
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "no NVIDIA GPU" in lines[0] and "--dry-run" in lines[0]


def test_a_step_past_the_budget_is_skipped_and_said_so(tmp_path: Path) -> None:
    check = gpu_check.Check(tmp_path, budget_s=10.0, t0=time.time(), dry_run=True)
    assert check.run("sleep", [sys.executable, "-c", "pass"], 60.0, need_s=100.0) is False
    result = json.loads((tmp_path / gpu_check.JSON_NAME).read_text())
    assert result["steps"][0]["status"] == "skipped" and "budget" in result["skipped"][0]["reason"]
    assert gpu_check.finish(check) == 1
    assert json.loads((tmp_path / gpu_check.JSON_NAME).read_text())["status"] == "partial"


def test_a_step_that_overruns_its_time_box_is_stopped(tmp_path: Path) -> None:
    check = gpu_check.Check(tmp_path, budget_s=120.0, t0=time.time(), dry_run=True)
    started = time.monotonic()
    sleeper = [sys.executable, "-c", "import time; print('working', flush=True); time.sleep(60)"]
    assert check.run("sleeper", sleeper, timeout_s=1.0) is False
    assert time.monotonic() - started < 60  # stopped: waiting for the sleeper would take its 60 s
    assert (
        check.run("fails", [sys.executable, "-c", "raise SystemExit('error: broken input')"], 30.0) is False
    )
    steps = json.loads((tmp_path / gpu_check.JSON_NAME).read_text())["steps"]
    assert [s["status"] for s in steps] == ["timeout", "failed"]
    assert steps[1]["error"] == "exit 1: error: broken input"
    assert gpu_check.finish(check) == 1
    assert "working" in (tmp_path / gpu_check.STEPS_LOG).read_text()


def test_recipes_pass_the_minilm_signature_and_shapes() -> None:
    from tritongen.examples import minilm

    recipe = gpu_check.recipes(64)["minilm"]
    assert recipe.source in ("tritongen.examples.minilm:encoder", "tritongen.examples.minilm:encoder_random")
    specs = [recipe.source_args()[i + 1] for i, a in enumerate(recipe.source_args()) if a == "--input-spec"]
    assert tuple(specs) == minilm.INPUT_SPECS
    assert recipe.source_args()[-2:] == ["--output-names", ",".join(minilm.OUTPUT_NAMES)]
    assert recipe.shape_args() == ["--shape", "input_ids=64", "--shape", "attention_mask=64"]
    assert gpu_check.recipes(64)["mlp"].shape_args() == []


@pytest.mark.slow
def test_minilm_with_random_weights_has_the_architecture_of_the_real_one() -> None:
    torch = pytest.importorskip("torch", reason="needs torch (tritongen[torch])")
    pytest.importorskip("transformers", reason="needs transformers (tritongen[torch])")
    from tritongen.examples import minilm

    model = minilm.encoder_random()
    again = minilm.encoder_random()
    state = model.state_dict()
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in state.items())
    assert state["bert.embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert sum(k.endswith("attention.self.query.weight") for k in state) == 6
    assert model.bert.config._attn_implementation == "eager"  # type: ignore[union-attr]
    ids = torch.randint(0, 30522, (3, 10))
    with torch.inference_mode():
        out = model(ids, torch.ones_like(ids))
    assert out.shape == (3, 384)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-5)
    if minilm.weights_available():
        real = minilm.encoder().state_dict()
        assert {k: v.shape for k, v in real.items()} == {k: v.shape for k, v in state.items()}


REQUIRES = {
    "locust": [
        "flask>=2",
        "gevent>=24",
        "msgpack>=1",
        "python-socketio[client]>=5",
        "pywin32; sys_platform == 'win32'",
    ],
    "flask": ["werkzeug>=3", "blinker>=1.9", "importlib-metadata>=3.6; python_version < '3.10'"],
    "gevent": ["greenlet>=3; platform_python_implementation == 'CPython'", "zope.event"],
    "python-socketio": [
        "bidict>=0.21",
        "websocket-client>=0.54; extra == 'client'",
        "aiohttp; extra == 'asyncio'",
    ],
    "pydantic": ["pydantic-core==2.5", "typing-extensions>=4.16"],
    "pydantic-core": ["typing-extensions>=4.16"],
    "nvidia-pytriton": ["numpy<2", "sh>=1.14", "importlib-metadata>=7"],
    "tritonclient": ["numpy>=1.19", "python-rapidjson>=0.9.1"],
    "hdrhistogram": ["pbr>=1.4"],
}


def test_the_plan_carries_what_the_host_lacks_and_nothing_it_has() -> None:
    plan = gpu_wheels.plan_packages(lambda name: REQUIRES.get(name, []))
    assert plan[:5] == ["nvidia-pytriton", "tritonclient", "locust", "pydantic", "hdrhistogram"]
    for needed in (
        "flask",
        "gevent",
        "greenlet",
        "zope-event",
        "bidict",
        "websocket-client",
        "python-rapidjson",
    ):
        assert needed in plan
    # on the host already (werkzeug, msgpack, numpy), not for Linux or 3.12 (pywin32,
    # importlib-metadata), an extra nobody asked for (aiohttp), or nvidia-pytriton's own
    # Python needs (sh): none of these travels
    for absent in ("werkzeug", "msgpack", "numpy", "pywin32", "importlib-metadata", "aiohttp", "sh"):
        assert absent not in plan
    assert plan.count("typing-extensions") == 1  # newer than the host's: carried, once
    assert len(plan) == len(set(plan))


def test_the_plan_from_this_environment_never_shadows_the_hosts_frameworks() -> None:
    plan = gpu_wheels.plan_packages(gpu_wheels.installed_requires)
    assert {"nvidia-pytriton", "tritonclient", "locust", "gevent", "pydantic-core", "hdrhistogram"} <= set(
        plan
    )
    assert {"typer", "click", "rich"} <= set(plan)  # the command line, pure Python
    assert not set(plan) & {"numpy", "torch", "protobuf", "onnxruntime", "onnx", "grpcio", "pygments"}
    assert not set(plan) & (gpu_wheels.DEVICE_PACKAGES - gpu_wheels.NEWER_THAN_HOST)


def test_every_requirement_of_tritongen_is_on_the_host_carried_or_unneeded() -> None:
    plan = gpu_wheels.plan_packages(gpu_wheels.installed_requires)
    assert gpu_wheels.unplanned(gpu_wheels.installed_requires, plan) == []
    fake = {"tritongen": ["numpy<2", "newthing>=1", "apache-tvm>=0.27", "pytest>=8; extra == 'dev'"]}
    assert gpu_wheels.unplanned(lambda name: fake.get(name, []), plan) == ["newthing"]


def test_the_repack_keeps_the_stub_for_the_host_python_and_what_the_binaries_need() -> None:
    stubs = "pytriton/tritonserver/python_backend_stubs"
    needed = {
        "pytriton/tritonserver/bin/tritonserver": ["libtritonserver-1.so", "libz.so.1"],
        f"{stubs}/3.12/triton_python_backend_stub": ["libpython3.12.so.1.0"],
        f"{stubs}/3.13/triton_python_backend_stub": ["libpython3-2.13.so.1.0"],
        "libtritonserver-1.so": ["libxml2-3.so"],
        "libxml2-3.so": ["libicuuc-4.so"],
    }
    closure = gpu_wheels.needed_closure(
        ["pytriton/tritonserver/bin/tritonserver", f"{stubs}/3.12/triton_python_backend_stub"], needed
    )
    assert closure == {
        "libtritonserver-1.so",
        "libz.so.1",
        "libxml2-3.so",
        "libicuuc-4.so",
        "libpython3.12.so.1.0",
    }
    keep = gpu_wheels.keep_member
    assert keep(f"{stubs}/3.12/triton_python_backend_stub", "3.12", closure)
    assert not keep(f"{stubs}/3.13/triton_python_backend_stub", "3.12", closure)
    assert not keep(f"{stubs}/3.8/triton_python_backend_stub", "3.12", closure)
    assert not keep("nvidia_pytriton.libs/libpython3-2.13.so.1.0", "3.12", closure)
    assert keep("nvidia_pytriton.libs/libpython3-2.13.so.1.0", "3.12", None)
    # other bundled libraries stay even when nothing links them: the server may dlopen them
    assert keep("nvidia_pytriton.libs/libdcgm-5.so.3", "3.12", closure)
    assert keep("pytriton/tritonserver/bin/tritonserver", "3.12", closure)


def test_the_repacked_record_lists_only_what_is_left() -> None:
    record = b"a/x.py,sha256=1,3\nb/y.so,sha256=2,4\nd.dist-info/RECORD,,\n"
    assert gpu_wheels._filtered_record(record, {"b/y.so"}) == b"a/x.py,sha256=1,3\nd.dist-info/RECORD,,\n"


def test_the_size_counts_the_tree_and_the_wheels(tmp_path: Path) -> None:
    tree = tmp_path / "a.txt"
    tree.write_bytes(b"x" * 1000)
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("w/__init__.py", "")
    missing = tmp_path / "deleted-but-tracked.txt"
    assert gpu_wheels.travel_bytes([tree, missing], [wheel]) == 1000 + wheel.stat().st_size
    assert gpu_wheels.LIMIT_BYTES == 64 * 2**20


def test_the_device_command_installs_the_carried_wheels_and_writes_to_out() -> None:
    command = gpu_wheels.device_command(".whl")
    assert command.startswith("PYTHONUNBUFFERED=1 python3 bench/gpu_check.py")
    assert "--install .whl" in command and "--out $OUT" in command


def test_the_source_hash_follows_the_sources_the_wheel_is_built_from(tmp_path: Path) -> None:
    for folder in gpu_wheels.SOURCE_DIRS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    before = gpu_wheels.source_hash(tmp_path)
    (tmp_path / "README.md").write_text("not a source")
    assert gpu_wheels.source_hash(tmp_path) == before
    (tmp_path / "templates" / "a.py").write_text("x = 2\n")
    assert gpu_wheels.source_hash(tmp_path) != before


def test_a_failed_install_still_writes_the_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run",
         "--install", str(tmp_path / "none"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert result["status"] == "failed"
    assert [(s["name"], s["status"]) for s in result["steps"]] == [("install", "failed")]
    assert "make gpu-wheels" in result["steps"][0]["error"]
