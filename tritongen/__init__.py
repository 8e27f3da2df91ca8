"""tritongen: from a trained model to a tuned, load-tested NVIDIA Triton deployment."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tritongen")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
