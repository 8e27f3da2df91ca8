"""Distributed load in the cluster: a Locust master and workers running the shipped locustfile.

The Locust options come from the same :class:`~tritongen.loadtest.spec.LoadSpec` as
``tritongen loadtest`` and the same :class:`~tritongen.loadtest.locust_process.LocustArgs`
command line, less what only a local run has (its results file, prepared inputs, clock).
In the cluster the workers send random data shaped from the model's metadata.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tritongen.deploy.compose import installed_version
from tritongen.deploy.kubernetes.objects import labels, metadata
from tritongen.deploy.kubernetes.spec import ClusterLoad, KubernetesSpec
from tritongen.deploy.kubernetes.triton import PORTS, service_host
from tritongen.errors import ConfigError
from tritongen.loadtest.locust_process import LocustArgs, load_generator_files, locust_options
from tritongen.loadtest.spec import LoadSpec, auto_processes

MOUNT = "/mnt/locust"
"""Where the locustfile and its package (the ConfigMap's items) lie in a Locust pod."""
DEPS = "/opt/tritongen/deps"
RESULTS = "/mnt/results"
"""The master's folder for its report (``--triton-json``), an ``emptyDir``: ``kubectl cp`` fetches it."""
MASTER_PORT = 5557
WEB_PORT = 8089
_LOCAL_ONLY = {"--triton-inputs", "--triton-results", "--triton-t0", "--processes", "--triton-metrics-url"}
_MASTER_ONLY_VALUE = {"-u", "-r", "--run-time", "--stop-timeout"}
_MASTER_ONLY_FLAG = {"--headless", "--only-summary"}
_ANY_CPUS = 1 << 20
"""``auto_processes`` without the local machine's CPU count as a cap."""


def _refuse_local_features(spec: LoadSpec) -> None:
    if len(spec.levels) != 1:
        raise ConfigError(
            f"the in-cluster load test runs one load level, not {len(spec.levels)}",
            "give one --concurrency or --rate value",
        )
    local = [
        (spec.input_data != "random", "--input-data other than random", "drop --input-data"),
        (bool(spec.input_values), "--input-value", "drop --input-value"),
        (bool(spec.shapes), "--shape", "drop --shape (dynamic dims get the locustfile's default)"),
        (spec.shared_memory != "none", "--shared-memory", "drop --shared-memory"),
        (spec.sequences, "--sequences", "load a sequence model with `tritongen loadtest`"),
    ]
    for refused, what, hint in local:
        if refused:
            raise ConfigError(f"the in-cluster load test cannot take {what}", hint)


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """Options for every Locust process, and those only the master takes; local-only ones dropped."""
    shared: list[str] = []
    master: list[str] = []
    i = 0
    while i < len(argv):
        option = argv[i]
        if option in _LOCAL_ONLY or option in _MASTER_ONLY_VALUE:
            if option in _MASTER_ONLY_VALUE:
                master += argv[i : i + 2]
            i += 2
            continue
        if option not in _MASTER_ONLY_FLAG:
            shared.append(option)
        i += 1
    return shared, master


def choose_load_model(models: list[str], asked: str | None, tune: dict[str, Any] | None) -> str:
    """The model the in-cluster load test sends to: ``--load-model``, else the tuned one, else the first.

    Raises:
        ConfigError: ``--load-model`` names a model the repository does not hold.
    """
    if asked is not None:
        if asked not in models:
            raise ConfigError(
                f"--load-model {asked} is not in the repository", f"use one of: {', '.join(models)}"
            )
        return asked
    tuned = (tune or {}).get("load_model") or (tune or {}).get("model")
    return str(tuned) if tuned in models else models[0]


def cluster_load(spec: LoadSpec, workers: int) -> ClusterLoad:
    """The Locust options of one in-cluster run of ``spec`` (its one level) on ``workers`` pods.

    Raises:
        ConfigError: settings only a local run supports (several levels, data files, shared
            memory, sequences) or impossible ones.
    """
    if workers < 1:
        raise ConfigError(f"--load-workers {workers} is below 1", "give 1 or more workers")
    _refuse_local_features(spec)
    if spec.arrival == "gamma" and workers > 1:
        raise ConfigError(
            f"--arrival gamma sends from one process, not {workers} load workers: bursts would average out",
            "give --load-workers 1, or another --arrival",
        )
    level = spec.levels[0]
    users = _users(spec.mode, level, workers)
    args = LocustArgs(
        host=spec.address.url,
        model=spec.model,
        model_version=spec.model_version,
        protocol=spec.protocol,
        users=users,
        processes=1,
        run_time_s=math.ceil(spec.warmup_s + spec.duration_s),
        window_s=spec.effective_window_s,
        t0=0.0,
        results=Path("-"),
        inputs=Path("-"),
        user_rate=level / users if spec.mode == "rate" else 0.0,
        arrival=spec.arrival,
        arrival_cv=spec.arrival_cv,
        max_inflight=spec.max_inflight,
        seed=spec.seed,
        timeout_s=spec.request_timeout_s,
    )
    shared, master = _split(locust_options(args))
    shared += ["--triton-batch-size", str(spec.batch_size), "--triton-string-length", str(spec.string_length)]
    return ClusterLoad(argv=tuple(shared), master_argv=tuple(master), workers=workers, model=spec.model)


def _users(mode: str, level: float, workers: int) -> int:
    """Locust users of the run: the concurrency, or one open-loop user per worker.

    Raises:
        ConfigError: fewer users than workers (a worker would stay idle), or a rate per worker
            above what one Locust process drives (``auto_processes``'s rate per process).
    """
    if mode == "concurrency":
        if level < workers:
            raise ConfigError(
                f"--concurrency {int(level)} is below --load-workers {workers}: a worker would stay idle",
                f"give a concurrency of at least {workers}, or fewer --load-workers",
            )
        return int(level)
    if auto_processes("rate", level / workers, cpus=_ANY_CPUS) > 1:
        need = auto_processes("rate", level, cpus=_ANY_CPUS)
        raise ConfigError(
            f"--rate {level:g} is {level / workers:g} requests/s per worker, more than one Locust "
            "worker process drives",
            f"raise --load-workers to {need} or more",
        )
    return workers


def _pip_init(image: str) -> dict[str, Any]:
    """Init container installing the locustfile's client libraries beside Locust (as compose's image does).

    They go on ``PYTHONPATH`` ahead of the image's packages, so the packages the image already
    has are pinned to its versions (constraints from ``pip list``): Locust keeps the gevent,
    greenlet and urllib3 it was released with.
    """
    client = installed_version("tritonclient", "2.51.0")
    script = (
        "pip list --format=freeze > /tmp/constraints.txt && "
        f'pip install --no-cache-dir --quiet --target {DEPS} -c /tmp/constraints.txt "$@"'
    )
    return {
        "name": "client-libraries",
        "image": image,
        "command": ["/bin/sh", "-c", script, "--"],
        "args": [f"tritonclient[http,grpc]=={client}", "numpy<2", "hdrhistogram", "prometheus_client"],
        "volumeMounts": [{"name": "deps", "mountPath": DEPS}],
    }


def config_map_key(path: str) -> str:
    """A load generator file's ConfigMap key: ``tritonload/recording.py`` -> ``tritonload__recording.py``.

    ConfigMap keys cannot hold ``/``; the volume's ``items`` put each key back at its path.
    """
    return path.replace("/", "__")


def locustfile_volume(spec: KubernetesSpec) -> dict[str, Any]:
    """The volume of the locustfile ConfigMap, each file at its path (the package in ``tritonload/``)."""
    items = [{"key": config_map_key(path), "path": path} for path in load_generator_files()]
    return {"name": "locustfile", "configMap": {"name": f"{spec.name}-locustfile", "items": items}}


def _locust_pod(spec: KubernetesSpec, args: list[str], component: str) -> dict[str, Any]:
    image = f"locustio/locust:{installed_version('locust', '2.32.0')}"
    container: dict[str, Any] = {
        "name": "locust",
        "image": image,
        "args": args,
        "env": [{"name": "PYTHONPATH", "value": DEPS}],
        "volumeMounts": [
            {"name": "locustfile", "mountPath": MOUNT, "readOnly": True},
            {"name": "deps", "mountPath": DEPS, "readOnly": True},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "512Mi"}},
    }
    volumes: list[dict[str, Any]] = [
        locustfile_volume(spec),
        {"name": "deps", "emptyDir": {}},
    ]
    if component == "load-master":
        container["ports"] = [
            {"name": "master", "containerPort": MASTER_PORT, "protocol": "TCP"},
            {"name": "web", "containerPort": WEB_PORT, "protocol": "TCP"},
        ]
        container["volumeMounts"].append({"name": "results", "mountPath": RESULTS})
        volumes.append({"name": "results", "emptyDir": {}})
    return {
        "metadata": {"labels": labels(spec, component)},
        "spec": {"initContainers": [_pip_init(image)], "containers": [container], "volumes": volumes},
    }


def _deployment(spec: KubernetesSpec, component: str, replicas: int, args: list[str]) -> dict[str, Any]:
    name = f"{spec.name}-{component}"
    match = {"app.kubernetes.io/instance": spec.name, "app.kubernetes.io/component": component}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(spec, name, component),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": match},
            "template": _locust_pod(spec, args, component),
        },
    }


def load_objects(spec: KubernetesSpec, load: ClusterLoad) -> list[dict[str, Any]]:
    """ConfigMap (the locustfile and its package), master Deployment and Service, worker Deployment.

    The master starts the run once every worker is connected (``--autostart``) and keeps
    running afterwards, so that the Deployment does not restart it into a second run. When
    the run stops, the locustfile prints its report to the master's log (merged latencies,
    the server's queue and compute time from Triton's statistics API, CPU and GPU figures
    from the Service's metrics port) and writes it as a ``tritongen.loadtest/1`` document to
    ``RESULTS``/loadtest.json in the master's pod.
    """
    master_host = f"{spec.name}-load-master"
    locustfile = ["-f", f"{MOUNT}/locustfile.py"]
    master_args = [*locustfile, "--master", "--autostart", "--expect-workers", str(load.workers)]
    master_args += [*load.master_argv, *load.argv]
    master_args += ["--triton-metrics-url", f"http://{service_host(spec)}:{dict(PORTS)['metrics']}/metrics"]
    master_args += ["--triton-json", f"{RESULTS}/loadtest.json"]
    worker_args = [*locustfile, "--worker", "--master-host", master_host, *load.argv]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(spec, f"{spec.name}-locustfile", "load"),
        "data": {config_map_key(path): text for path, text in load_generator_files().items()},
    }
    master_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec, master_host, "load-master"),
        "spec": {
            "selector": {
                "app.kubernetes.io/instance": spec.name,
                "app.kubernetes.io/component": "load-master",
            },
            "ports": [
                {"name": "master", "port": MASTER_PORT, "targetPort": "master", "protocol": "TCP"},
                {"name": "web", "port": WEB_PORT, "targetPort": "web", "protocol": "TCP"},
            ],
        },
    }
    return [
        config_map,
        _deployment(spec, "load-master", 1, master_args),
        master_service,
        _deployment(spec, "load-worker", load.workers, worker_args),
    ]
