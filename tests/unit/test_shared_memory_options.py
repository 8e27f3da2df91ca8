"""``--shared-memory system``: tensors through regions registered with the real server, and cleaned up.

The locustfile's shared-memory helpers are driven in a subprocess (importing Locust patches
the interpreter) against the served ``shm_echo`` model, whose outputs tell what the server
read (``y = x + 1``) and show what it wrote into the output region. Load tests check that the
regions are registered while the load runs and neither registered nor in ``/dev/shm`` after.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.loadtest.locust_process import LocustArgs
from tritongen.loadtest.shared_memory import check_shared_memory, output_sizes

from support.paths import ROOT


def test_a_server_on_another_host_is_refused_in_one_line() -> None:
    result = CliRunner().invoke(
        app,
        ["loadtest", "mlp_onnx", "--url", "10.20.30.40:8000", "--shared-memory", "system"],
    )
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "--shared-memory system needs a server on this host, not 10.20.30.40" in lines[0]


def test_shared_memory_option_checks() -> None:
    def at(url: str) -> ServerAddress:
        return ServerAddress.parse(url)

    check_shared_memory("system", at("localhost:8000"), None)
    check_shared_memory("system", at("127.0.0.2:8000"), 4096)
    check_shared_memory("system", at("[::1]:8000"), None)
    check_shared_memory("none", at("example.org:8000"), None)  # nothing to check without shared memory
    with pytest.raises(ConfigError, match=r"needs a server on this host, not example\.org"):
        check_shared_memory("system", at("grpc://example.org:8001"), None)
    with pytest.raises(ConfigError, match="--shared-memory 'cuda' is unknown"):
        check_shared_memory("cuda", at("localhost:8000"), None)
    with pytest.raises(ConfigError, match="must be positive"):
        check_shared_memory("system", at("localhost:8000"), 0)


def test_output_sizes() -> None:
    outputs = [
        {"name": "y", "datatype": "FP16", "shape": [-1, 3, 5]},
        {"name": "s", "datatype": "BYTES", "shape": [-1, 2]},
    ]
    assert output_sizes(outputs[:1], batched=True, rows=4, fallback=None) == {"y": 4 * 3 * 5 * 2}
    assert output_sizes(outputs, batched=True, rows=4, fallback=100) == {"y": 120, "s": 100}
    with pytest.raises(ConfigError, match=r"output 's' \(BYTES 4x2\)"):
        output_sizes(outputs, batched=True, rows=4, fallback=None)
    with pytest.raises(ConfigError, match="output 'y'"):  # unbatched: -1 is a dynamic dim
        output_sizes(outputs[:1], batched=False, rows=4, fallback=None)


def test_locust_arguments() -> None:
    args = LocustArgs(
        host="localhost:8000",
        model="m",
        protocol="http",
        users=1,
        processes=1,
        run_time_s=5,
        window_s=1.0,
        t0=time.time(),
        results=Path("w.jsonl"),
        inputs=Path("i.npz"),
        kind="shared-memory",
        kind_options={"shared-memory": "system", "shm-prefix": "tritongen_1_ab_", "output-shm-size": "4096"},
    )
    argv = args.argv()
    at = argv.index("--triton-shared-memory")
    assert argv[at : at + 4] == ["--triton-shared-memory", "system", "--triton-shm-prefix", "tritongen_1_ab_"]
    assert argv[argv.index("--triton-output-shm-size") + 1] == "4096"
    plain = LocustArgs(**{**args.__dict__, "kind": "tensor", "kind_options": {}}).argv()
    assert "--triton-shared-memory" not in plain and "--triton-output-shm-size" not in plain


def _bench_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tables_shm", ROOT / "bench" / "tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bench_block_renders_each_contender_and_the_paired_ratios() -> None:
    tables = _bench_tables()

    def summary(median: float) -> dict[str, float]:
        return {"median": median, "ci_low": median * 0.9, "ci_high": median * 1.1}

    contenders = {
        f"{protocol}_{kind}": {
            "summary": {
                "infer_per_s": summary(400.0 if kind == "system" else 40.0),
                "p99_us": summary(12_000.0),
                "generator_cpu_ms_per_request": summary(0.08 if kind == "system" else 7.0),
                "server_cpu_ms_per_request": summary(1.2 if kind == "system" else 8.9),
            }
        }
        for protocol in ("http", "grpc")
        for kind in ("none", "system")
    }
    ratio = {"estimate": 10.0, "ci_low": 5.0, "ci_high": 20.0, "significant": True}
    doc = {
        "tensor_mib": 4.0,
        "settings": {"concurrency": 2, "duration_s": 6.0, "rounds": 3},
        "rounds_completed": 3,
        "contenders": contenders,
        "paired": {"http": {"infer_per_s": ratio}, "grpc": {}},
        "status": "aborted",
        "reason": "the server went away",
    }
    lines = tables.render_shared_memory(doc)
    text = "\n".join(lines)
    assert "4 MiB each way per request" in lines[0] and "3 interleaved rounds of 6 s" in lines[0]
    assert (
        "| HTTP | system shared memory | 400 [360, 440] | 12.0 [10.8, 13.2] | 0.080 [0.072, 0.088] |" in text
    )
    assert "| gRPC | in the request | 40 [36, 44] |" in text
    assert "HTTP, shared memory / in the request, paired by round: throughput 10.00× [5.00, 20.00]" in text
    assert "gRPC, shared memory / in the request, paired by round: throughput –" in text
    assert lines[-1] == "The rounds stopped early (aborted): the server went away."
    assert any(block.name == "shared_memory" for block in tables.BLOCKS)
