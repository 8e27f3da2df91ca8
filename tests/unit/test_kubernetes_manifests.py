"""``tritongen kubernetes``: every object validates strictly, overlays build, stores, refusals, load args."""

from __future__ import annotations

import itertools
import json
import os
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
from tritongen.deploy.kubernetes.kustomize import ManifestFile, publish, stage
from tritongen.errors import RepositoryError

from support.paths import ROOT

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
    # The repository's Python-backend requirements, installed through the image's entrypoint.
    assert container["command"][0] == "/opt/nvidia/nvidia_entrypoint.sh"
    assert "pip install" in container["command"][3] and container["args"][0] == "tritonserver"
    assert {"name": "PIP_BREAK_SYSTEM_PACKAGES", "value": "1"} in container["env"]
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "10"]
    assert pod["terminationGracePeriodSeconds"] > 10
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
    assert pairs["--triton-seed"] == "7" and pairs["--host"] == "triton.default.svc:8001"
    assert worker["spec"]["replicas"] == 3
    worker_args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert worker_args[worker_args.index("--master-host") + 1] == service["metadata"]["name"]
    assert "--triton-model" in worker_args and "-u" not in worker_args
    assert {p["port"] for p in service["spec"]["ports"]} == {5557, 8089}
    (config_map,) = _docs(written / "loadtest" / "locustfile.yaml")
    # Every file of the folder, each under a key without "/"; the pods' volume puts each at its path.
    folder = ROOT / "loadtests"
    files = [folder / "locustfile.py", *sorted((folder / "tritonload").glob("*.py"))]
    paths = [path.relative_to(folder).as_posix() for path in files]
    assert config_map["data"] == {
        path.replace("/", "__"): (folder / path).read_text() for path in paths
    }  # e.g. tritonload__recording.py
    for pod in (master, worker):
        (volume,) = [v for v in pod["spec"]["template"]["spec"]["volumes"] if v["name"] == "locustfile"]
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        assert volume["configMap"]["items"] == [{"key": p.replace("/", "__"), "path": p} for p in paths]


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
    assert (
        trigger["metricType"] == "Value"
        and 'pod=~"triton-[a-z0-9]+-[a-z0-9]+"' in trigger["metadata"]["query"]
    )


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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scale-window", "20s"], "holds fewer than two scrapes (--scrape-interval 15s)"),
        (["--scale-window", "30s", "--scrape-interval", "20s"], "holds fewer than two scrapes"),
        (["--scrape-interval", "often"], "--scrape-interval 'often' is not a Prometheus duration"),
        (["--prometheus-url", "prometheus:9090"], "is not an http(s) URL with a host"),
        (["--prometheus-url", "http://:9090/x"], "is not an http(s) URL with a host"),
        (["--model-store", "pvc:shared", "--storage-class", "fast"], "--storage-class is for the new claim"),
        (["--model-store", "s3://b/m", "--storage-class", "fast"], "--storage-class is for the new claim"),
        (["--concurrency", "2", "--load-workers", "3"], "a worker would stay idle"),
        (["--rate", "9000", "--load-workers", "2"], "raise --load-workers to 3 or more"),
        (["--namespace", "n" * 64], "is not a Kubernetes namespace"),
        (["--load-workers", "0"], "--load-workers 0 is below 1"),
        (["--rate", "100", "--load-workers", "0"], "--load-workers 0 is below 1"),
        (["--scale-target", "0"], "--scale-target 0 must be above 0"),
    ],
)
def test_settings_that_cannot_work_are_refused_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, *args)
    assert code != 0 and message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_long_names_of_secrets_and_claims_with_dots_are_taken(tmp_path: Path) -> None:
    claim = "models." + "c" * 60  # a DNS-1123 subdomain, longer than a label
    code, _, stderr = _write(tmp_path / "a", "--model-store", f"pvc:{claim}")
    assert code == 0, stderr
    code, _, stderr = _write(tmp_path / "b", "--model-store", "gs://b/m", "--store-secret", "gcs.key-1")
    assert code == 0, stderr
    code, _, stderr = _write(tmp_path / "c", "--namespace", "n" * 63)
    assert code == 0, stderr


def test_output_may_not_be_the_current_directory_or_overlap_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for out, message in [
        (".", "is the current directory or holds it"),
        ("/", "is the current directory or holds it"),
        ("repo", "overlaps the model repository"),
        ("repo/deploy", "overlaps the model repository"),
    ]:
        result = runner.invoke(app, ["kubernetes", "repo", "-o", out, "--force"])
        assert result.exit_code != 0 and message in result.stderr, (out, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    result = runner.invoke(app, ["kubernetes", "repo", "-o", "deploy"])  # relative: resolved
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "deploy" / "gpu" / "kustomization.yaml").is_file()


@pytest.mark.parametrize(
    ("url", "values", "joined"),
    [
        (
            "http://prometheus-operated.monitoring.svc:9090",
            ("http://prometheus-operated.monitoring.svc", 9090, ""),
            "http://prometheus-operated.monitoring.svc:9090",
        ),
        (
            "https://prom.example.com/prometheus",
            ("https://prom.example.com", 443, "/prometheus"),
            "https://prom.example.com:443/prometheus",
        ),
        ("http://10.0.0.9/prom/", ("http://10.0.0.9", 80, "/prom"), "http://10.0.0.9:80/prom"),
    ],
)
def test_helm_values_rebuild_the_prometheus_url(
    tmp_path: Path, url: str, values: tuple[str, int, str], joined: str
) -> None:
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, "--prometheus-url", url)
    assert code == 0, stderr
    prometheus = _docs(out / "prometheus-adapter-values.yaml")[0]["prometheus"]
    assert (prometheus["url"], prometheus["port"], prometheus["path"]) == values
    # prometheus-adapter's chart: --prometheus-url={{url}}{{if port}}:{{port}}{{end}}{{path}}
    assert f"{prometheus['url']}:{prometheus['port']}{prometheus['path']}" == joined


def test_memory_request_adds_every_served_models_stub_peak_and_a_server_baseline(tmp_path: Path) -> None:
    mi = 2**20
    compare = tmp_path / "compare.json"
    engines = [
        {"model": "mlp_onnx", "peak_rss_bytes": 300 * mi},
        {"model": "mlp_onnx", "peak_rss_bytes": 200 * mi},  # the same model measured twice: its peak
        {"model": "text_onnx", "peak_rss_bytes": 100 * mi},
        {"model": "not_served", "peak_rss_bytes": 5000 * mi},
    ]
    compare.write_text(json.dumps({"schema": "tritongen.compare/1", "engines": engines}))
    out = tmp_path / "deploy"
    code, stdout, stderr = _write(out, "--from", compare)
    assert code == 0, stderr
    container = _docs(out / "base" / "deployment.yaml")[0]["spec"]["template"]["spec"]["containers"][0]
    request = int(container["resources"]["requests"]["memory"].removesuffix("Mi"))
    assert request == round((300 + 100) * 1.5) + 1024  # both served models, plus tritonserver's baseline
    assert "fixed_onnx" in stdout  # the served model without a figure is named
    for overlay in ("gpu", "cpu"):
        patch = _docs(out / overlay / "accelerator-patch.yaml")[0]
        limit = patch["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
        assert limit == f"{2 * request + 1024}Mi"  # twice the request, plus the in-memory /dev/shm


def test_names_are_set_by_the_options_the_namespace_and_models_outlive_the_server(tmp_path: Path) -> None:
    out = tmp_path / "my deploy"
    code, stdout, stderr = _write(out, "--name", "vision", "--namespace", "infer", "--autoscaler", "keda",
                                  "--storage-class", "rwx-files")  # fmt: skip
    assert code == 0, stderr
    for label, obj in _objects(out).items():
        if obj["kind"] != "Namespace" and "patch" not in label and obj["kind"] != "Kustomization":
            assert obj["metadata"]["namespace"] == "infer", label
    (namespace,) = _docs(out / "namespace" / "namespace.yaml")
    assert namespace["kind"] == "Namespace" and namespace["metadata"]["name"] == "infer"
    (claim,) = _docs(out / "storage" / "pvc.yaml")
    assert claim["spec"]["storageClassName"] == "rwx-files"
    query = _docs(out / "base" / "scaledobject.yaml")[0]["spec"]["triggers"][0]["metadata"]["query"]
    assert 'namespace="infer",pod=~"vision-[a-z0-9]+-[a-z0-9]+"' in query
    (master, _) = _docs(out / "loadtest" / "master.yaml")
    args = master["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--host") + 1] == "vision.infer.svc:8000"
    monitor = _docs(out / "base" / "podmonitor.yaml")[0]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["infer"]
    assert monitor["spec"]["podMetricsEndpoints"][0]["interval"] == "15s"
    # The copy steps quote paths and wait long enough for a ReadWriteMany volume.
    assert f"kubectl apply -k '{out}/storage'" in stdout and "--timeout=5m pod/vision-models-copy" in stdout
    if KUBECTL is not None:  # deleting an overlay deletes the server, never the models or namespace
        kinds = {o["kind"] for o in _kustomize(out / "gpu")}
        assert not kinds & {"Namespace", "PersistentVolumeClaim"}
        assert {o["kind"] for o in _kustomize(out / "storage")} == {"PersistentVolumeClaim"}


def test_gcs_secret_volume_names_its_key_and_liveness_tolerates_a_busy_server(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, "--model-store", "gs://b/m", "--store-secret", "gcs-key")
    assert code == 0, stderr
    pod = _docs(out / "base" / "deployment.yaml")[0]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["items"] == [{"key": "credentials.json", "path": "credentials.json"}]
    liveness = pod["containers"][0]["livenessProbe"]
    assert liveness["timeoutSeconds"] >= 10 and liveness["periodSeconds"] * liveness["failureThreshold"] >= 60


def test_written_without_a_local_locust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-cluster options are built without looking for the local locust command."""
    from tritongen.errors import MissingDependencyError
    from tritongen.loadtest import locust_process

    def missing() -> Path:
        raise MissingDependencyError("the locust command is not installed in this environment", "x")

    monkeypatch.setattr(locust_process, "locust_binary", missing)
    code, _, stderr = _write(tmp_path / "deploy", "--no-validate")
    assert code == 0, stderr


def test_a_hanging_kubectl_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritongen.deploy.kubernetes import validate

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text("#!/bin/sh\nsleep 30\n")
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(validate, "KUSTOMIZE_TIMEOUT_S", 1)
    code, _, stderr = _write(tmp_path / "deploy")
    assert code != 0 and "took more than 1 s" in stderr and len(stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


class _Interrupting(ManifestFile):
    def text(self) -> str:
        raise KeyboardInterrupt


def test_staging_leaves_nothing_behind_on_a_failed_write_or_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    # "base" is written as a directory first, then as a file: the second write fails.
    unwritable = [ManifestFile("base/a.yaml", "a", [{"a": 1}]), ManifestFile("base", "b", [{"b": 1}])]
    with pytest.raises(RepositoryError):
        stage(unwritable, out)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt):
        stage([ManifestFile("base/a.yaml", "a", [{"a": 1}]), _Interrupting("base/b.yaml", "b")], out)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_between_the_renames_puts_the_old_output_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "old.yaml").write_text("old")
    staged = stage([ManifestFile("base/a.yaml", "a", [{"a": 1}])], out)
    real_rename = Path.rename
    renames = 0

    def rename(self: Path, target: Any) -> Path:
        nonlocal renames
        renames += 1
        if renames == 2:  # the old directory is aside, the new one not yet in place
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        publish(staged, out)
    monkeypatch.undo()
    assert (out / "old.yaml").read_text() == "old"
    shutil.rmtree(staged)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--load-model", "nope"], "--load-model nope is not in the repository"),
        (["--autoscaler", "none", "--scale-target", "3"], "need an autoscaler"),
        (["--autoscaler", "none", "--scale-on", "queue-ratio"], "need an autoscaler"),
        (["--concurrency", "8,32"], "runs one load level, not 2"),
        (
            ["--rate", "50", "--arrival", "gamma:2", "--load-workers", "2"],
            "--arrival gamma sends from one process",
        ),
    ],
)
def test_options_the_deployment_would_ignore_or_fail_on_are_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, *args)
    assert code != 0 and message in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


def test_the_load_test_defaults_to_the_tuned_model(tmp_path: Path) -> None:
    """With a tune result and no --load-model, the load goes to the model whose target it set."""
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"schema": "tritongen.tune/2", "model": "mlp_onnx", "load_model": "mlp_onnx"}))
    out = tmp_path / "deploy"
    code, _, stderr = _write(out, "--from", tune, "--no-validate")
    assert code == 0, stderr
    (worker,) = _docs(out / "loadtest" / "worker.yaml")
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--triton-model") + 1] == "mlp_onnx"
    code, _, stderr = _write(tmp_path / "other", "--no-validate")
    (worker,) = _docs(tmp_path / "other" / "loadtest" / "worker.yaml")
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--triton-model") + 1] == "fixed_onnx"  # the first, without a tune
