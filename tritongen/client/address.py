"""A server's address, parsed once from what the user gave and carried from there on.

``--url`` may be ``host:port``, ``http://host:port/``, ``grpc://host:8001``, an IPv6 address in
brackets (``[::1]:8000``) or, for an OpenAI-compatible server, a base URL with a path
(``https://gw.example/llm/v1``). :class:`ServerAddress` holds the parts (scheme, host, port,
the protocol requests go over, the base path, the metrics endpoint); everything else asks it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

import psutil

from tritongen.errors import ConfigError

Protocol = Literal["http", "grpc"]
DEFAULT_PORTS: dict[str, int] = {"http": 8000, "grpc": 8001}
METRICS_PORT = 8002
"""Where Triton serves its Prometheus metrics by default."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ANY_ADDRESS = "0.0.0.0"
"""Reaches this machine when connected to (a server bound to every address listens on it)."""
SCHEMES = ("http", "https", "grpc")


def normalise_url(url: str) -> str:
    """Strip a scheme and trailing slash: ``http://host:8000/`` -> ``host:8000``."""
    for scheme in SCHEMES:
        if url.startswith(f"{scheme}://"):
            url = url[len(scheme) + 3 :]
    return url.rstrip("/")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``127.*``, ``localhost``, ``::1``)."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass(frozen=True)
class ServerAddress:
    """Where a server is, and how requests reach it."""

    host: str
    """Without brackets (``::1``)."""
    port: int
    protocol: Protocol = "http"
    """What requests go over: HTTP (Triton's or an OpenAI-compatible API) or gRPC."""
    scheme: str = "http"
    """The URL's scheme as given (``http`` when none was)."""
    path: str = ""
    """A base path the server's API sits under, without ``/v1`` (``/llm``; empty for most servers)."""
    given_metrics_url: str | None = None
    """``--metrics-url`` as given (None: the server's default, :attr:`metrics_url`)."""

    @classmethod
    def parse(cls, url: str, protocol: str = "http", metrics_url: str | None = None) -> ServerAddress:
        """A Triton server at ``url``, its metrics at ``metrics_url`` (default: the host's port 8002).

        A URL without a port gets the protocol's default (8000 for HTTP, 8001 for gRPC).

        Raises:
            ConfigError: an unknown protocol, or a URL that is not ``[scheme://]host[:port]``.
        """
        if protocol not in DEFAULT_PORTS:
            raise ConfigError(f"unknown protocol {protocol!r}", "use --protocol http or --protocol grpc")
        scheme, host, port, _path = _split(url, DEFAULT_PORTS[protocol])
        return cls(host, port, protocol, scheme, given_metrics_url=metrics_url)  # type: ignore[arg-type]

    @classmethod
    def openai(cls, url: str, metrics_url: str | None = None) -> ServerAddress:
        """An OpenAI-compatible server at its base URL (``http://host:8000`` or ``host:8000/v1``).

        Its API is under ``{path}/v1``; its metrics (vLLM's) at ``{path}/metrics`` on the same port
        unless ``metrics_url`` says otherwise. Without a port: 443 for ``https``, else 80.

        Raises:
            ConfigError: a URL that is not ``[scheme://]host[:port][/path]``.
        """
        scheme, host, port, path = _split(url, 0)
        port = port or (443 if scheme == "https" else 80)
        path = path.rstrip("/").removesuffix("/v1")
        address = cls(host, port, "http", scheme, path)
        return replace(address, given_metrics_url=metrics_url or f"{address.base_url}/metrics")

    @property
    def metrics_url(self) -> str:
        """The server's Prometheus metrics endpoint: as given, else Triton's ``http://host:8002/metrics``."""
        if self.given_metrics_url:
            return self.given_metrics_url
        return f"http://{replace(self, port=METRICS_PORT).url}/metrics"

    @property
    def url(self) -> str:
        """``host:port`` (an IPv6 host in brackets): what a client connects to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``scheme://host:port/path``: the URL an HTTP API's paths go under."""
        return f"{self.scheme if self.scheme != 'grpc' else 'http'}://{self.url}{self.path}"

    @property
    def is_loopback(self) -> bool:
        """Whether the server is on this machine's loopback (reachable from here only)."""
        return is_loopback_host(self.host)

    @property
    def on_this_machine(self) -> bool:
        """Whether connecting to the address reaches this machine (its loopback, or ``0.0.0.0``)."""
        return self.is_loopback or self.host == ANY_ADDRESS

    def listening_pid(self) -> int | None:
        """The process listening at this address when it is on this machine; ``None`` otherwise."""
        if not self.on_this_machine:
            return None
        try:
            connections = psutil.net_connections(kind="tcp")
        except (psutil.AccessDenied, OSError):
            return None
        for conn in connections:
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == self.port and conn.pid:
                return int(conn.pid)
        return None

    def beside(self, protocol: Protocol) -> ServerAddress:
        """The same server over ``protocol`` at its default port (the gRPC address of an HTTP one)."""
        return replace(self, protocol=protocol, port=DEFAULT_PORTS[protocol], scheme="http")


def _split(url: str, default_port: int) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of ``url`` (``default_port`` where it names none).

    Raises:
        ConfigError: no host, or a port that is not a number.
    """
    text = url.strip()
    parts = urlsplit(text if "://" in text else f"http://{text}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or parts.scheme not in SCHEMES:
        raise ConfigError(
            f"the server address {url!r} is not [http://]HOST[:PORT]",
            "e.g. localhost:8000 or http://10.0.0.5:8000",
        )
    return parts.scheme, parts.hostname, default_port if port is None else port, parts.path.rstrip("/")
