"""tritongen: from a trained model to a tuned, load-tested NVIDIA Triton deployment."""

import os
from importlib.metadata import PackageNotFoundError, version

# Servers and Locust are started with a pre-exec hook (they die with this process), so
# they are forked while this process may have gRPC calls in flight. With gRPC's fork
# support on, the child restarts gRPC's poller between fork and exec and about 1 start
# in 100 crashes ("epoll_wait error: Bad file descriptor"; measured here). Nothing here
# uses gRPC across a fork, so it is off unless the user asks for it.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

try:
    __version__ = version("tritongen")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
