"""``tritongen kubernetes``: every object validates strictly, overlays build, stores, refusals, load args."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils
from typer.testing import CliRunner

from tritongen.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "model_repository"
runner = CliRunner()
KUBECTL = shutil.which("kubectl")
OLDER = "1.30"


def _write(out: Path, *args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["kubernetes", str(REPO), "-o", str(out), *[str(a) for a in args]])
    return result.exit_code, result.stdout, result.stderr


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _objects(out: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(out.rglob("*.yaml")):
        for doc in _docs(path):
            if "apiVersion" in doc and "metadata" in doc:
                found[f"{path.relative_to(out)}:{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


def _kustomize(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    built = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def _server(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "triton"]
    return dep


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s") / "deploy"
    code, stdout, stderr = _write(
        out, "--concurrency", "24", "--duration", "20s", "--warmup", "2s", "--protocol", "grpc",
        "--load-workers", "3", "--load-model", "mlp_onnx", "--seed", "7",
    )  # fmt: skip
    assert code == 0, stderr
    assert "objects valid against Kubernetes" in stdout
    return out


@pytest.mark.parametrize("version", [None, OLDER])
def test_every_written_object_validates_strictly(written: Path, version: str | None) -> None:
    version = version or utils.latest_version()
    custom = {"PodMonitor", "ScaledObject"}
    checked = 0
    for label, obj in _objects(written).items():
        if obj["kind"] in custom or obj["kind"] == "Kustomization" or "patch" in label:
            continue
        utils.validate(obj, version, strict=True)  # raises on unknown or missing fields
        checked += 1
    assert checked >= 10


def test_strict_validation_catches_an_unknown_field(written: Path) -> None:
    dep = _docs(written / "base" / "deployment.yaml")[0]
    dep["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    with pytest.raises(utils.ValidationError):
        utils.validate(dep, utils.latest_version(), strict=True)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
@pytest.mark.parametrize("version", [None, OLDER])
def test_each_overlay_builds_and_its_objects_validate(written: Path, version: str | None) -> None:
    for name in ("base", "gpu", "cpu", "loadtest"):
        for obj in _kustomize(written / name):
            if obj["kind"] not in ("PodMonitor", "ScaledObject"):
                utils.validate(obj, version or utils.latest_version(), strict=True)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_gpu_overlay_has_a_gpu_limit_and_cpu_and_base_have_none(written: Path) -> None:
    def limits(name: str) -> dict[str, Any]:
        container = _server(_kustomize(written / name))["spec"]["template"]["spec"]["containers"][0]
        return dict(container["resources"].get("limits", {}))

    assert limits("gpu")["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in limits("cpu") and "nvidia.com/gpu" not in limits("base")
    gpu_pod = _server(_kustomize(written / "gpu"))["spec"]["template"]["spec"]
    assert gpu_pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "tolerations" not in _server(_kustomize(written / "cpu"))["spec"]["template"]["spec"]


def test_server_deployment_args_probes_and_spread(written: Path) -> None:
    dep = _docs(written / "base" / "deployment.yaml")[0]
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"].startswith("nvcr.io/nvidia/tritonserver:")
    assert (
        "--model-control-mode=none" in container["args"] and "--model-repository=/models" in container["args"]
    )
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/v2/health/ready"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "http": 8000,
        "grpc": 8001,
        "metrics": 8002,
    }
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert "pip install" in container["command"][2]  # the repository's Python-backend requirements
    assert "replicas" not in dep["spec"]  # the HPA owns the count
    pdb = _docs(written / "base" / "pdb.yaml")[0]
    assert pdb["apiVersion"] == "policy/v1" and pdb["spec"]["maxUnavailable"] == 1


def test_locust_master_args_carry_the_load_options(written: Path) -> None:
    master, service = _docs(written / "loadtest" / "master.yaml")
    (worker,) = _docs(written / "loadtest" / "worker.yaml")
    args = master["spec"]["template"]["spec"]["containers"][0]["args"]
    pairs = dict(itertools.pairwise(args))
    assert pairs["--expect-workers"] == "3" and pairs["-u"] == "24" and pairs["--run-time"] == "22s"
    assert pairs["--triton-model"] == "mlp_onnx" and pairs["--triton-protocol"] == "grpc"
    assert pairs["--triton-seed"] == "7" and pairs["--host"] == "triton.default.svc.cluster.local:8001"
    assert worker["spec"]["replicas"] == 3
    worker_args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert worker_args[worker_args.index("--master-host") + 1] == service["metadata"]["name"]
    assert "--triton-model" in worker_args and "-u" not in worker_args
    assert {p["port"] for p in service["spec"]["ports"]} == {5557, 8089}
    (config_map,) = _docs(written / "loadtest" / "locustfile.yaml")
    assert config_map["data"]["locustfile.py"] == (ROOT / "loadtests" / "locustfile.py").read_text()


@pytest.mark.parametrize(
    ("store", "secret", "expect"),
    [
        ("s3://bucket/models", "aws-creds", "envFrom"),
        ("as://account/container/models", "azure-creds", "envFrom"),
        ("gs://bucket/models", "gcs-key", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("pvc:shared-models", None, "persistentVolumeClaim"),
        ("nfs:10.0.0.5:/exports/models", None, "nfs"),
    ],
)
def test_model_stores(tmp_path: Path, store: str, secret: str | None, expect: str) -> None:
    out = tmp_path / "deploy"
    extra = ["--store-secret", secret] if secret else []
    code, _, stderr = _write(out, "--model-store", store, *extra, "--autoscaler", "keda")
    assert code == 0, stderr
    dep = _docs(out / "base" / "deployment.yaml")[0]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    text = json.dumps(dep)
    assert expect in text
    if store.startswith(("s3", "gs", "as")):
        assert f"--model-repository={store}" in container["args"]
        assert not (out / "base" / "pvc.yaml").exists()
    else:
        assert "--model-repository=/models" in container["args"]
        assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    if secret:
        # the Secret is referenced by name: no Secret object, no credential value anywhere
        assert secret in text
        assert all(o["kind"] != "Secret" for o in _objects(out).values())
        for path in out.rglob("*.yaml"):
            text = path.read_text()
            assert "AWS_SECRET_ACCESS_KEY" not in text and "AZURE_STORAGE_KEY" not in text
    scaled = _docs(out / "base" / "scaledobject.yaml")[0]
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["metricType"] == "Value" and 'pod=~"triton-.*"' in trigger["metadata"]["query"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-store", "ftp://host/models"], "unknown scheme 'ftp'"),
        (["--min-replicas", "5", "--max-replicas", "2"], "--min-replicas 5 is above --max-replicas 2"),
        (["--scale-window", "soon"], "not a Prometheus duration"),
        (["--concurrency", "1,8"], "one load level"),
        (["--from", ROOT / "pyproject.toml"], "is not JSON"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str | Path], message: str
) -> None:
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, *args)
    assert code != 0 and message in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_existing_directory_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, stderr = _write(out)
    assert code != 0 and "--force" in stderr and len(stderr.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    code, _, stderr = _write(out, "--force")
    assert code == 0, stderr
    assert not (out / "keep.txt").exists() and (out / "gpu" / "kustomization.yaml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]  # no staging left behind


def test_plan_for_another_tensorrt_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    meta_path = repo / "mlp_onnx" / "tritongen.json"
    meta = json.loads(meta_path.read_text())
    meta["engine"] = {"tensorrt_version": "8.2.1"}
    meta_path.write_text(json.dumps(meta))
    out = tmp_path / "deploy"
    image = "nvcr.io/nvidia/tritonserver:24.08-py3"  # ships TensorRT 10.3
    result = runner.invoke(app, ["kubernetes", str(repo), "-o", str(out), "--image", image])
    assert result.exit_code != 0 and "mlp_onnx" in result.stderr and "TensorRT" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_repository_failing_lint_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    config = repo / "mlp_onnx" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size", "max_batch_sise"))
    out = tmp_path / "deploy"
    result = runner.invoke(app, ["kubernetes", str(repo), "-o", str(out)])
    assert result.exit_code != 0 and "mlp_onnx" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_without_the_validator_it_refuses_unless_told_not_to_validate(tmp_path: Path) -> None:
    """With kubernetes-validate missing (blocked from import), the command names the extra."""
    script = (
        "import sys; sys.modules['kubernetes_validate'] = None\n"
        "from tritongen.cli.main import main\n"
        "sys.argv = ['tritongen', 'kubernetes', sys.argv[1], '-o', sys.argv[2], *sys.argv[3:]]\n"
        "main()\n"
    )
    out = tmp_path / "deploy"
    refused = subprocess.run(
        [sys.executable, "-c", script, str(REPO), str(out)], capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "tritongen[kubernetes]" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not out.exists()
    written = subprocess.run(
        [sys.executable, "-c", script, str(REPO), str(out), "--no-validate"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    assert (out / "gpu" / "kustomization.yaml").is_file()
