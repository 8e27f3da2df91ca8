"""The cost of checking every response against ``validation_data``: throughput with and without, side by side.

The example MLP of the committed repository (``model_repository/mlp_onnx``) is served by one
embedded Triton server. Its expected outputs for 16 random entries are taken from the server
itself; two data files hold the same entries, one with ``validation_data`` and one without.
Per protocol (HTTP, gRPC) both are load-tested at concurrency 16 in interleaved rounds; the
paired ratio validated / plain of throughput (geometric mean over rounds, 95% t interval) is
judged against the target: at most 10% less (ratio ≥ 0.90). Every validated run must also
report all of its responses checked and matching.

Usage: ``.venv/bin/python bench/validation.py [--rounds 5] [--concurrency 16] [--duration 6]
[--warmup 2] [--protocols http,grpc] [--json bench/results/validation.json]`` (about 4 minutes
with the defaults).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.intervals import (
    DEFAULT_CONFIDENCE,
    Ratio,
    Summary,
    format_summary,
    paired_ratio,
    summarise,
)
from tritongen.loadtest.rounds import Contender, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.validation/1"
MODEL = "mlp_onnx"
REPOSITORY = Path(__file__).resolve().parents[1] / "model_repository"
ENTRIES = 16
TARGET_RATIO = 0.90
"""Validated throughput must be at least this fraction of the plain one."""
KINDS = ("plain", "validated")

console = Console()


def write_data(server: LocalTritonServer, root: Path) -> dict[str, Path]:
    """The two data files: the same random entries, with and without the server's own outputs as expected."""
    rng = np.random.default_rng(0)
    endpoint = TritonEndpoint(server.http_url, "http", timeout_s=10)
    data, expected = [], []
    try:
        for _ in range(ENTRIES):
            x = rng.standard_normal((1, 16)).astype(np.float32)
            result = endpoint.infer(MODEL, {"input": x}, ("logits",))
            data.append({"input": x[0].tolist()})
            expected.append({"logits": np.asarray(result.outputs["logits"])[0].tolist()})
    finally:
        endpoint.close()
    files = {"plain": root / "plain.json", "validated": root / "validated.json"}
    files["plain"].write_text(json.dumps({"data": data}))
    files["validated"].write_text(json.dumps({"data": data, "validation_data": expected}))
    return files


def describe(rounds: Any, protocols: list[str], confidence: float) -> dict[str, Any]:
    """Per contender its rounds' throughput; per protocol the paired ratio validated / plain."""
    contenders: dict[str, Any] = {}
    for name, runs in rounds.runs.items():
        contenders[name] = {
            "infer_per_s": [run.infer_per_s for run in runs],
            "summary": _summary([run.infer_per_s for run in runs], confidence),
            "validation": [run.validation for run in runs],
        }
    ratios: dict[str, Any] = {}
    for protocol in protocols:
        plain = rounds.figures(f"{protocol}_plain", lambda r: r.infer_per_s)
        checked = rounds.figures(f"{protocol}_validated", lambda r: r.infer_per_s)
        ratio = paired_ratio(checked, plain, confidence)
        all_match = all(
            run.validation and run.validation["validated"] > 0 and not run.validation["mismatched"]
            for run in rounds.runs[f"{protocol}_validated"]
        )
        ratios[protocol] = {
            "ratio": None if ratio is None else ratio.to_json(),
            "meets_target": ratio is not None and ratio.estimate >= TARGET_RATIO,
            "all_validated_and_matching": all_match,
        }
    return {"contenders": contenders, "ratios": ratios}


def _summary(values: list[float], confidence: float) -> dict[str, Any] | None:
    summary = summarise(values, confidence)
    return None if summary is None else summary.to_json()


def print_table(document: dict[str, Any]) -> None:
    """The throughput of each contender and the ratio per protocol."""
    table = Table(title=f"{MODEL} at concurrency {document['settings']['concurrency']}: validation cost")
    for header in ("protocol", "plain infer/s", "validated infer/s", "validated / plain", "target ≥ 0.90"):
        table.add_column(header, justify="right")
    for protocol, figures in document["ratios"].items():
        plain = document["contenders"][f"{protocol}_plain"]["summary"]
        checked = document["contenders"][f"{protocol}_validated"]["summary"]
        ratio = figures["ratio"]
        table.add_row(
            protocol,
            format_summary(Summary.from_json(plain)) if plain else "–",
            format_summary(Summary.from_json(checked)) if checked else "–",
            "–" if ratio is None else Ratio.from_json(ratio).text(),
            "yes" if figures["meets_target"] else "no",
        )
    console.print(table)


def main() -> None:
    """Serve the MLP, measure plain and validated loads in rounds, print and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per run")
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "validation.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    protocols = [p for p in args.protocols.split(",") if p]
    with (
        tempfile.TemporaryDirectory(prefix="tritongen-validation-bench-") as tmp,
        LocalTritonServer(REPOSITORY, http_port=0, grpc_port=0, metrics_port=0) as server,
    ):
        files = write_data(server, Path(tmp))
        contenders = [
            Contender(
                f"{protocol}_{kind}",
                LoadSpec(
                    model=MODEL,
                    address=ServerAddress.parse(
                        server.http_url if protocol == "http" else server.grpc_url,
                        protocol,
                        server.metrics_url,
                    ),
                    levels=(args.concurrency,),
                    input_data=files[kind],
                    duration_s=args.duration,
                    warmup_s=args.warmup,
                    max_duration_s=args.duration,
                ),
            )
            for protocol in protocols
            for kind in KINDS
        ]
        rounds = measure_rounds(
            contenders,
            args.rounds,
            on_start=lambda n, total, name: console.print(f"round {n}/{total}: {name}"),
        )
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "model": MODEL,
        "settings": {
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "entries": ENTRIES,
            "protocols": protocols,
            "confidence": args.confidence,
            "target_ratio": TARGET_RATIO,
        },
        "status": rounds.status,
        "reason": rounds.reason,
        "rounds_completed": rounds.completed,
        **describe(rounds, protocols, args.confidence),
    }
    print_table(document)
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
