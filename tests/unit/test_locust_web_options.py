"""Locust's own statistics see every request of the locustfile, on the real embedded server.

The locustfile counts requests in its own histograms and feeds Locust's statistics in
batches; the request counts of both must be equal (ok + errors = requests, errors = failures)
in Locust's CSV, in a master's merged worker reports, and live in the web UI.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

MODEL = "mlp_onnx"


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--web-port", "8089"], "error: --web-port goes with --web"),
        (["--web", "--master"], "error: --web does not go with --master"),
    ],
)
def test_bad_web_options_are_refused_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["loadtest", MODEL, "--url", "127.0.0.1:1", *args])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr


def test_a_web_port_in_use_is_refused_in_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(
            app, ["loadtest", MODEL, "--url", "127.0.0.1:1", "--web", "--web-port", str(port)]
        )
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} (Locust web UI)" in lines[0] and "--web-port" in lines[0], lines


def test_web_ui_command_line() -> None:
    from tritongen.loadtest.locust_process import LocustArgs

    args = LocustArgs(
        host="h:1", model=MODEL, protocol="http", users=2, processes=1, run_time_s=5, window_s=1.0, t0=0.0,
        results=Path("r"), inputs=Path("i"), web_port=18089,
    )  # fmt: skip
    options = args.options()
    assert "--headless" not in options and args.web_url() == "http://127.0.0.1:18089"
    at = options.index("--web-port")
    assert options[at + 1] == "18089" and options[options.index("--web-host") + 1] == "127.0.0.1"
    assert options[options.index("--autoquit") + 1] == "0" and "--autostart" in options
    headless = LocustArgs(**{**args.__dict__, "web_port": None})
    assert headless.options()[0] == "--headless" and headless.web_url() is None
