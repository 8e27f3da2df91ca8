"""``tritongen perf-analyzer --help``: the perf_analyzer options it takes, what each does, what it refuses."""

from __future__ import annotations

from tritongen.perfanalyzer.options import UNSUPPORTED

HELP_ROWS = (
    ("-m MODEL", "the model to measure (required)"),
    ("-x VERSION", "the model version to send to (default: the server's choice, the newest)"),
    ("-u HOST:PORT", "the server (default localhost:8000, or localhost:8001 with -i grpc)"),
    ("-i http|grpc", "the protocol (default http)"),
    ("--concurrency-range START[:END[:STEP]]", "closed-loop levels (default 1; END 0: until -l)"),
    (
        "--request-rate-range START[:END[:STEP]]",
        "open-loop levels, requests/s (latency from the scheduled time)",
    ),
    ("--request-distribution constant|poisson", "arrivals of a request rate (default constant)"),
    (
        "--async, -a / --sync",
        "with a request rate: no bound on requests in flight / at most --max-threads (the default)",
    ),
    ("--streaming", "gRPC streams: a decoupled model is streamed (tritongen streams only those)"),
    ("--max-threads N", "with a request rate and --sync: requests in flight at most (default 4)"),
    ("--binary-search", "with -l and a range: bisect it for the highest level within the limit"),
    ("-b N", "batch size (default 1)"),
    ("--shape NAME:DIMS", "dims of a dynamic input, e.g. INPUT0:1,3,224,224 (repeatable)"),
    (
        "--input-data zero|random|FILE|DIR",
        "request data: perf_analyzer's JSON (validation_data checked), an .npz, "
        "or a directory of one raw file per input",
    ),
    (
        "--string-length N, --string-data S",
        "random strings of N bytes (default 128), or S in every BYTES input",
    ),
    (
        "--sequence-length N, --sequence-id-range START:END",
        "sequence models: requests per sequence, correlation IDs",
    ),
    ("--shared-memory none|system, --output-shared-memory-size B", "tensors through system shared memory"),
    ("-p MS, --measurement-interval MS", "the measurement window (default 5000)"),
    (
        "--measurement-mode time_windows|count_windows",
        "windows of -p ms, or of --measurement-request-count requests",
    ),
    ("--measurement-request-count N", "requests per count window (default 50)"),
    (
        "-s PCT, --stability-percentage PCT",
        "stable: 3 windows within PCT% on throughput and latency (default 10)",
    ),
    ("-r N, --max-trials N", "windows at most before a level is reported unstable (default 10)"),
    ("--percentile N", "stabilise on and report pN latency instead of the average"),
    (
        "-l MS, --latency-threshold MS",
        "stop the sweep after the first level above this latency (default 0: none)",
    ),
    ("-f FILE.csv, --verbose-csv", "perf_analyzer's CSV (one row per level; verbose adds 3 columns)"),
    (
        "--collect-metrics, --metrics-url URL, --metrics-interval MS",
        "the server's GPU/CPU metrics, and the CSV columns",
    ),
    ("--profile-export-file FILE", "tritongen's JSON report of the runs (tritongen.loadtest/1)"),
    ("-v, --verbose", "each measurement window's figures"),
)


def help_text() -> str:
    """What ``tritongen perf-analyzer --help`` prints: the options it takes, and what it refuses."""
    width = max(len(flag) for flag, _ in HELP_ROWS)
    lines = [
        "Usage: tritongen perf-analyzer -m MODEL [perf_analyzer's options]   (also: tritongen pa)",
        "",
        "Measures a Triton model with perf_analyzer's command line, console report and CSV, on",
        "tritongen's load generator. Options:",
        "",
        *[f"  {flag.ljust(width)}  {meaning}" for flag, meaning in HELP_ROWS],
        "",
        "Refused, with the tritongen way: " + ", ".join(sorted(UNSUPPORTED)) + ", --shared-memory cuda.",
    ]
    return "\n".join(lines)
