"""What ``tritongen kubernetes`` is asked to write, typed and checked before anything is built."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tritongen.errors import ConfigError

StoreKind = Literal["s3", "gs", "as", "pvc", "new-pvc", "nfs"]
Autoscaler = Literal["hpa", "keda", "none"]
AUTOSCALERS: tuple[str, ...] = ("hpa", "keda", "none")
DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
MODELS_MOUNT = "/models"
"""Where a volume-backed model repository is mounted in the Triton container."""

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_BUCKETS = {"s3://": "s3", "gs://": "gs", "as://": "as"}
SECRET_KEYS: dict[str, str] = {
    "s3": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (as environment variables)",
    "gs": "credentials.json (a service-account key file; GOOGLE_APPLICATION_CREDENTIALS points at it)",
    "as": "AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY (as environment variables)",
}
"""The keys the ``--store-secret`` Secret must hold, per bucket scheme."""


@dataclass(frozen=True)
class ModelStore:
    """Where the Triton pods read the model repository from."""

    kind: StoreKind
    uri: str = ""
    """The bucket URI (``s3``, ``gs``, ``as``) passed to ``--model-repository`` as it is."""
    claim: str = ""
    """The PersistentVolumeClaim (``pvc``: an existing one; ``new-pvc``: the one written)."""
    server: str = ""
    export: str = ""
    secret: str | None = None
    """Secret with the bucket's credentials (referenced, never copied)."""
    storage_class: str | None = None

    @property
    def is_bucket(self) -> bool:
        """Whether Triton reads the repository from a cloud bucket itself."""
        return self.kind in ("s3", "gs", "as")

    @property
    def repository_arg(self) -> str:
        """The value of ``tritonserver --model-repository``."""
        return self.uri if self.is_bucket else MODELS_MOUNT


def check_name(value: str, option: str) -> str:
    """A Kubernetes object name (RFC 1123 label), at most 40 characters so that suffixes fit.

    Raises:
        ConfigError: not a valid name.
    """
    if len(value) > 40 or not _NAME.match(value):
        raise ConfigError(
            f"{option} {value!r} is not a Kubernetes name",
            "use lower-case letters, digits and '-', at most 40 characters, e.g. triton",
        )
    return value


def parse_store(text: str | None, name: str, secret: str | None = None) -> ModelStore:
    """``--model-store``: a bucket URI, ``pvc:CLAIM``, ``nfs:SERVER:/EXPORT``, or None (a new claim).

    Raises:
        ConfigError: an unknown scheme, a malformed value, or a secret given for a volume.
    """
    if secret is not None:
        check_name(secret, "--store-secret")
    if text is None or text == "":
        store = ModelStore(kind="new-pvc", claim=f"{name}-models")
    elif text.startswith(tuple(_BUCKETS)):
        kind = _BUCKETS[text[:5]]
        if len(text) <= 5 or text[5] == "/":
            raise ConfigError(f"--model-store {text!r} names no bucket", f"e.g. {text[:5]}my-bucket/models")
        return ModelStore(kind=kind, uri=text, secret=secret)  # type: ignore[arg-type]
    elif text.startswith("pvc:"):
        store = ModelStore(kind="pvc", claim=check_name(text[4:], "--model-store pvc:"))
    elif text.startswith("nfs:"):
        server, _, export = text[4:].partition(":")
        if not server or not export.startswith("/"):
            raise ConfigError(
                f"--model-store {text!r} is not nfs:SERVER:/EXPORT", "e.g. nfs:10.0.0.5:/models"
            )
        store = ModelStore(kind="nfs", server=server, export=export)
    else:
        scheme = text.split(":", 1)[0] if ":" in text else text
        raise ConfigError(
            f"--model-store {text!r}: unknown scheme {scheme!r}",
            "use s3://…, gs://…, as://…, pvc:CLAIM or nfs:SERVER:/EXPORT (or nothing: a new claim)",
        )
    if secret is not None:
        raise ConfigError(
            "--store-secret is for bucket stores (s3://, gs://, as://)", "drop it for a volume store"
        )
    return store


@dataclass(frozen=True)
class Scaling:
    """How the Triton Deployment scales."""

    autoscaler: Autoscaler = "hpa"
    min_replicas: int = 1
    max_replicas: int = 4
    signal: str = "queue-time"
    target: float | None = None
    """``--scale-target``: overrides the tuned or default target."""
    window: str = "1m"
    prometheus_url: str = DEFAULT_PROMETHEUS_URL

    def check(self) -> None:
        """Reject impossible replica counts and unknown autoscalers.

        Raises:
            ConfigError: min above max, a count below 1, or an unknown autoscaler.
        """
        if self.autoscaler not in AUTOSCALERS:
            raise ConfigError(f"--autoscaler {self.autoscaler!r} is unknown", "use hpa, keda or none")
        if self.min_replicas < 1:
            raise ConfigError(f"--min-replicas {self.min_replicas} is below 1", "run at least one replica")
        if self.min_replicas > self.max_replicas:
            raise ConfigError(
                f"--min-replicas {self.min_replicas} is above --max-replicas {self.max_replicas}",
                "give a minimum no larger than the maximum",
            )
        if self.target is not None and self.target <= 0:
            raise ConfigError(f"--scale-target {self.target:g} must be above 0", "pass a positive value")


@dataclass(frozen=True)
class ClusterLoad:
    """The in-cluster Locust: one level of the ``loadtest`` options, run by a master and workers."""

    argv: tuple[str, ...]
    """Locust options shared by master and workers (the ``--triton-*`` options)."""
    master_argv: tuple[str, ...]
    """Options only the master takes (users, spawn rate, run time)."""
    workers: int = 2
    model: str = ""


@dataclass(frozen=True)
class KubernetesSpec:
    """Everything ``tritongen kubernetes`` writes from."""

    repo: Path
    output: Path
    name: str = "triton"
    namespace: str = "default"
    image: str | None = None
    store: ModelStore = field(default_factory=lambda: ModelStore(kind="new-pvc", claim="triton-models"))
    scaling: Scaling = field(default_factory=Scaling)
    sources: tuple[Path, ...] = ()
    """``--from`` JSON files: a tune result (scaling target) and/or a compare result (memory)."""
    load: ClusterLoad | None = None
    kubernetes_version: str | None = None
    """Schema version to validate against (None: the newest the validator ships)."""
    startup_timeout_s: int = 900
    """How long the startup probe lets a replica load its models."""
    force: bool = False
    validate: bool = True

    def check(self) -> None:
        """Check every setting before anything is built.

        Raises:
            ConfigError: a bad name, namespace, replica count, timeout, or an existing output.
        """
        check_name(self.name, "--name")
        check_name(self.namespace, "--namespace")
        self.scaling.check()
        if self.startup_timeout_s < 30:
            raise ConfigError(
                f"--startup-timeout {self.startup_timeout_s}s is too short to load models", "give 30s or more"
            )
        if self.load is not None and self.load.workers < 1:
            raise ConfigError(f"--load-workers {self.load.workers} is below 1", "give 1 or more workers")
        out = self.output
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out} exists and is not a directory", "choose another -o")
        if out.is_dir() and any(out.iterdir()) and not self.force:
            raise ConfigError(
                f"{out} exists and is not empty", "pass --force to replace it, or choose another -o"
            )
