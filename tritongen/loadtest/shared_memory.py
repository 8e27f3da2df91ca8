"""System shared memory for a load test: the checks before Locust starts, the clean-up after it.

With ``--shared-memory system`` the Locust processes put the inputs and outputs in regions
of POSIX shared memory registered with the server (``loadtests/tritonload/shared_memory.py``).
Their names start with a prefix chosen here, ``tritongen_<pid>_<random>_``, which holds
this process's pid: after each run whatever the run left (a Locust process killed before
it could clean up) is unregistered and removed by that prefix, and regions of tritongen
processes that are gone are found by the pid in their names.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any, Literal

import psutil

from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface
from tritongen.errors import ConfigError, ServerError
from tritongen.io.loadgen_shared import tensor_byte_size
from tritongen.loadtest.sequences import is_sequence_model
from tritongen.loadtest.streaming import is_decoupled
from tritongen.server.local import SHM_DIR, SHM_PREFIX

SharedMemory = Literal["none", "system"]
SHARED_MEMORY_KINDS: tuple[SharedMemory, ...] = ("none", "system")
PROBE_BYTES = 64
"""Size of the region the check before a run has the server map."""
PROBE_SUFFIX = "probe"
"""The probe region's name after the run's prefix (a run's own regions end in ``_in``/``_outN``)."""


def check_shared_memory(kind: str, address: ServerAddress, output_size: int | None) -> None:
    """Refuse shared memory that cannot work: an unknown kind, a server on another host, a bad size.

    Raises:
        ConfigError: what is wrong, in one line.
    """
    if kind not in SHARED_MEMORY_KINDS:
        raise ConfigError(f"--shared-memory {kind!r} is unknown", "use none or system")
    if output_size is not None and output_size < 1:
        raise ConfigError(
            "--output-shared-memory-size must be positive", "e.g. --output-shared-memory-size 65536"
        )
    if kind == "none":
        return
    if not address.is_loopback:
        raise ConfigError(
            f"--shared-memory system needs a server on this host, not {address.host}",
            "load-test it with --shared-memory none, or run tritongen on the server's host with a "
            "127.0.0.1 or localhost URL",
        )


def output_sizes(
    outputs: list[dict[str, Any]], batched: bool, rows: int, fallback: int | None
) -> dict[str, int]:
    """Bytes of each output per request: its metadata shape (batch dim = ``rows``), else ``fallback``.

    Raises:
        ConfigError: an output of unknown size (a dynamic dim, or BYTES) and no ``fallback``.
    """
    sizes = {}
    for tensor in outputs:
        dims = [int(d) for d in tensor["shape"]]
        if batched and dims:
            dims[0] = rows
        size = tensor_byte_size(tensor["datatype"], dims)
        if size is not None:
            sizes[tensor["name"]] = size
        elif fallback is not None:
            sizes[tensor["name"]] = fallback
        else:
            shape = "x".join(str(d) for d in dims)
            raise ConfigError(
                f"output '{tensor['name']}' ({tensor['datatype']} {shape}) has no size known before "
                "the request, so its shared-memory region cannot be sized",
                "pass --output-shared-memory-size BYTES (the largest it can be)",
            )
    return sizes


def prepare_shared_memory(
    endpoint: TritonEndpoint,
    interface: ModelInterface,
    config: dict[str, Any],
    rows: int,
    fallback: int | None,
) -> str:
    """Check the model (its server ``config``) and the server for shared memory; the run's region name prefix.

    Checks that every output can be sized, and that the server maps a region this host
    creates (:func:`probe_shared_memory`); regions that a tritongen process that is gone left
    registered are unregistered first (they would hold its memory; their names never collide
    with new ones).

    Raises:
        ConfigError: a streaming or sequence model, an output of unknown size, a server that
            refuses its shared-memory API, or one that cannot map this host's shared memory.
    """
    model = interface.name
    if is_decoupled(config) or is_sequence_model(config):
        refuse_shared_memory(model, "system")
    output_sizes(endpoint.output_tensors(model), interface.batched, rows, fallback)
    try:
        registered = endpoint.shared_memory_regions()
    except ServerError as e:
        raise ConfigError(
            f"--shared-memory system: the server refuses its shared-memory API ({e.message})",
            "use --shared-memory none, or a server that allows the shared-memory API",
        ) from e
    for name in registered:
        owner = region_owner(name)
        if owner is not None and not psutil.pid_exists(owner):
            release_region(endpoint, name)
    prefix = f"{SHM_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}_"
    probe_shared_memory(endpoint, f"{prefix}{PROBE_SUFFIX}")
    return prefix


def refuse_shared_memory(model: str, kind: str) -> None:
    """Refuse shared memory for a streaming or sequence model's load (``kind``: ``--shared-memory``).

    Raises:
        ConfigError: ``kind`` is not ``none``.
    """
    if kind != "none":
        raise ConfigError(
            f"--shared-memory system covers one-response models; '{model}' is a streaming or sequence model",
            "load-test it with --shared-memory none",
        )


def probe_shared_memory(endpoint: TritonEndpoint, name: str, shm_dir: Path = SHM_DIR) -> None:
    """Create a small region in ``shm_dir``, have the server register it, then unregister and remove it.

    Registering makes the server open and map the region: a server that does not see this
    host's ``/dev/shm`` (one in a container without shared IPC, reached on a loopback port)
    fails here in one line, instead of failing every request of the run.

    Raises:
        ConfigError: the region cannot be created, or the server cannot map it.
    """
    try:
        fd = os.open(shm_dir / name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, PROBE_BYTES)
        finally:
            os.close(fd)
    except OSError as e:
        with contextlib.suppress(OSError):
            (shm_dir / name).unlink()
        raise ConfigError(
            f"--shared-memory system: cannot create a region in {shm_dir} ({e.strerror or e})",
            "free space in /dev/shm, or use --shared-memory none",
        ) from e
    try:
        endpoint.register_shared_memory(name, f"/{name}", PROBE_BYTES)
    except ServerError as e:
        cause = " ".join(e.message.split())
        raise ConfigError(
            f"--shared-memory system: the server cannot map this host's shared memory ({cause})",
            "run the load generator on the server's host, sharing its IPC namespace "
            "(a container needs --ipc=host), or use --shared-memory none",
        ) from e
    finally:
        release_region(endpoint, name, shm_dir)


def region_owner(name: str) -> int | None:
    """The pid in a region name ``tritongen_<pid>_...``; None for a name of another kind."""
    if not name.startswith(SHM_PREFIX):
        return None
    owner = name[len(SHM_PREFIX) :].split("_", 1)[0]
    return int(owner) if owner.isdigit() else None


def release_region(endpoint: TritonEndpoint, name: str, shm_dir: Path = SHM_DIR) -> None:
    """Unregister one region from the server (if it still is) and remove its file (if it is there)."""
    with contextlib.suppress(ServerError):
        endpoint.unregister_shared_memory(name)
    with contextlib.suppress(OSError):
        (shm_dir / name).unlink()


def release_regions(endpoint: TritonEndpoint, prefix: str, shm_dir: Path = SHM_DIR) -> list[str]:
    """Unregister and remove every region whose name starts with ``prefix``; return their names."""
    try:
        registered = [name for name in endpoint.shared_memory_regions() if name.startswith(prefix)]
    except ServerError:
        registered = []
    files = [path.name for path in shm_dir.glob(f"{prefix}*")]
    names = sorted(set(registered) | set(files))
    for name in names:
        release_region(endpoint, name, shm_dir)
    return names
