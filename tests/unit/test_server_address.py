"""A server's address, parsed once: its parts, its defaults, and what the rest of tritongen asks of it."""

from __future__ import annotations

import os
import socket

import pytest

from tritongen.client.address import ServerAddress, normalise_url
from tritongen.client.repository import RepositoryControl
from tritongen.errors import ConfigError, ServerError

from support.network import free_port


@pytest.mark.parametrize(
    ("url", "protocol", "host", "port", "text"),
    [
        ("localhost:8001", "grpc", "localhost", 8001, "localhost:8001"),
        ("http://127.0.0.1:8000/", "http", "127.0.0.1", 8000, "127.0.0.1:8000"),
        ("[::1]:8000", "http", "::1", 8000, "[::1]:8000"),
        ("grpc://example.org:9001", "grpc", "example.org", 9001, "example.org:9001"),
        ("localhost", "http", "localhost", 8000, "localhost:8000"),
        ("localhost", "grpc", "localhost", 8001, "localhost:8001"),
    ],
)
def test_the_parts_of_an_address(url: str, protocol: str, host: str, port: int, text: str) -> None:
    address = ServerAddress.parse(url, protocol)
    assert (address.host, address.port, address.protocol, address.url) == (host, port, protocol, text)
    assert normalise_url(url) in (text, host)


def test_the_metrics_endpoint_is_triton_s_beside_the_host_unless_given() -> None:
    assert ServerAddress.parse("10.0.0.5:9000").metrics_url == "http://10.0.0.5:8002/metrics"
    assert ServerAddress.parse("[::1]:8000").metrics_url == "http://[::1]:8002/metrics"
    given = ServerAddress.parse("10.0.0.5:9000", metrics_url="http://prom:9400/m")
    assert given.metrics_url == "http://prom:9400/m"
    assert given.beside("grpc").metrics_url == "http://prom:9400/m"  # as given, whatever the protocol


def test_the_grpc_address_beside_an_http_one_keeps_the_host() -> None:
    assert ServerAddress.parse("http://triton.internal:8000/").beside("grpc").url == "triton.internal:8001"
    assert ServerAddress.parse("10.0.0.5:9000").beside("grpc").url == "10.0.0.5:8001"
    assert ServerAddress.parse("localhost").beside("grpc").protocol == "grpc"


def test_an_openai_base_url_keeps_its_path_and_its_metrics_on_its_own_port() -> None:
    plain = ServerAddress.openai("http://host:8000/v1")
    assert (plain.host, plain.port, plain.path, plain.metrics_url) == (
        "host",
        8000,
        "",
        "http://host:8000/metrics",
    )
    assert ServerAddress.openai("host:9000").port == 9000
    gateway = ServerAddress.openai("https://gw.example/llm/v1/")
    assert (gateway.host, gateway.port, gateway.path) == ("gw.example", 443, "/llm")
    assert gateway.base_url == "https://gw.example:443/llm"


@pytest.mark.parametrize("url", ["host:port", "http://:8000", "ftp://host:21", ""])
def test_what_is_not_an_address_is_refused_in_one_line(url: str) -> None:
    with pytest.raises(ConfigError, match="is not") as raised:
        ServerAddress.parse(url)
    assert "\n" not in str(raised.value)


def test_which_addresses_are_this_machine() -> None:
    assert ServerAddress.parse("127.0.0.2:8000").is_loopback
    assert ServerAddress.parse("[::1]:8000").is_loopback
    assert not ServerAddress.parse("0.0.0.0:8000").is_loopback
    assert ServerAddress.parse("0.0.0.0:8000").on_this_machine
    assert not ServerAddress.parse("example.com:8000").on_this_machine


def test_the_process_listening_at_a_local_address() -> None:
    assert ServerAddress.parse("example.com:8000").listening_pid() is None  # not this machine
    assert ServerAddress.parse(f"127.0.0.1:{free_port()}").listening_pid() in (os.getpid(), None)


def test_a_load_the_server_never_answers_is_an_error_naming_the_model_and_the_wait() -> None:
    """A listener that takes the connection and never answers stands for a server whose load hung."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        control = RepositoryControl(f"127.0.0.1:{listener.getsockname()[1]}", timeout_s=1)
        try:
            with pytest.raises(ServerError) as caught:
                control.load("stuck")
        finally:
            control.close()
    assert "no answer to loading 'stuck' within 1 s" in str(caught.value)
