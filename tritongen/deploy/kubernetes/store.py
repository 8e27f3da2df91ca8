"""The model store: what the Triton pod mounts or reads, and the claim written for a new volume.

Bucket credentials are only referenced (``envFrom`` or a secret volume of ``--store-secret``);
no value is ever written into a manifest.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from tritongen.deploy.kubernetes.spec import MODELS_MOUNT, ModelStore

GCS_KEY_DIR = "/var/run/secrets/tritongen-gcs"
GCS_KEY_FILE = "credentials.json"
_VOLUME = "models"


@dataclass(frozen=True)
class StorePod:
    """What the store adds to the Triton pod."""

    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    env: list[dict[str, Any]] = field(default_factory=list)
    env_from: list[dict[str, Any]] = field(default_factory=list)


def store_pod(store: ModelStore) -> StorePod:
    """The volumes, mounts and environment that give the Triton container its repository."""
    if store.kind in ("pvc", "new-pvc"):
        volume = {"name": _VOLUME, "persistentVolumeClaim": {"claimName": store.claim, "readOnly": True}}
        return StorePod([volume], [{"name": _VOLUME, "mountPath": MODELS_MOUNT, "readOnly": True}])
    if store.kind == "nfs":
        volume = {"name": _VOLUME, "nfs": {"server": store.server, "path": store.export, "readOnly": True}}
        return StorePod([volume], [{"name": _VOLUME, "mountPath": MODELS_MOUNT, "readOnly": True}])
    if store.secret is None:  # workload identity / instance roles: nothing to reference
        return StorePod()
    if store.kind == "gs":
        # Naming the key makes a Secret without it fail at mount time, not at the first read.
        items = [{"key": GCS_KEY_FILE, "path": GCS_KEY_FILE}]
        volume = {"name": "gcs-credentials", "secret": {"secretName": store.secret, "items": items}}
        mount = {"name": "gcs-credentials", "mountPath": GCS_KEY_DIR, "readOnly": True}
        env = [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{GCS_KEY_DIR}/{GCS_KEY_FILE}"}]
        return StorePod([volume], [mount], env)
    return StorePod(env_from=[{"secretRef": {"name": store.secret}}])


def model_claim(store: ModelStore, metadata: dict[str, Any], size_gi: int) -> dict[str, Any] | None:
    """The PersistentVolumeClaim of a new model volume (None for any other store).

    ``ReadWriteMany`` so that replicas on several nodes mount it (and a helper pod fills it):
    the storage class must support it (NFS, EFS, Filestore, Azure Files, CephFS …).
    """
    if store.kind != "new-pvc":
        return None
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": f"{size_gi}Gi"}},
    }
    if store.storage_class:
        spec["storageClassName"] = store.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def copy_pod(store: ModelStore, metadata: dict[str, Any]) -> dict[str, Any] | None:
    """A helper pod that mounts the model claim read-write, to copy the repository in (volume stores)."""
    if store.kind not in ("pvc", "new-pvc"):
        return None
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "copy",
                    "image": "busybox:1.36",
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": _VOLUME, "mountPath": MODELS_MOUNT}],
                }
            ],
            "volumes": [{"name": _VOLUME, "persistentVolumeClaim": {"claimName": store.claim}}],
        },
    }


COPY_WAIT = "5m"
"""How long the copy steps wait for the helper pod (a ReadWriteMany volume may take minutes)."""


def copy_commands(store: ModelStore, namespace: str, pod: str, repo: str, output: str) -> list[str]:
    """The shell commands that create the model claim and copy the local repository into it.

    Run them before the server starts: Triton loads what the claim holds when it starts.
    """
    if store.kind not in ("pvc", "new-pvc"):
        return []
    ns, q_pod, q_repo = shlex.quote(namespace), shlex.quote(pod), shlex.quote(repo)
    claim = [f"kubectl apply -k {shlex.quote(output + '/storage')}"] if store.kind == "new-pvc" else []
    return [
        *claim,
        f"kubectl apply -f {shlex.quote(output + '/copy-models-pod.yaml')}",
        f"kubectl -n {ns} wait --for=condition=Ready --timeout={COPY_WAIT} pod/{q_pod}",
        f"tar -C {q_repo} -cf - . | kubectl -n {ns} exec -i {q_pod} -- tar -C {MODELS_MOUNT} -xf -",
        f"kubectl -n {ns} delete pod {q_pod}",
    ]
