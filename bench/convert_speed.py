"""Time ``convert`` and config rendering on the example models; print figures and write JSON.

Usage: ``.venv/bin/python bench/convert_speed.py [--repeat N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from provenance import RESULTS, require_committed_tree, write_result

from tritongen.examples.models import EXAMPLES, write_example
from tritongen.pipeline.request import BuildRequest
from tritongen.pipeline.run import build_models
from tritongen.triton.batching import BatchingOptions
from tritongen.triton.render import render_config


def _time_us(fn: object, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", type=Path, default=RESULTS / "convert_speed.json")
    args = parser.parse_args()
    require_committed_tree(args.json)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in EXAMPLES:
            source = write_example(name, root / f"{name}.onnx")
            request = BuildRequest(
                source=source, name=name, repo=root / "repo", options=BatchingOptions(), force=True
            )
            convert_us = _time_us(lambda request=request: build_models(request), args.repeat)
            config = build_models(request).models[0].config
            render_us = _time_us(lambda config=config: render_config(config), args.repeat)
            row = {
                "model": name,
                "convert_median_us": statistics.median(convert_us),
                "render_and_check_median_us": statistics.median(render_us),
                "repeat": args.repeat,
            }
            results.append(row)
            print(
                f"{name:6s} convert {row['convert_median_us'] / 1000:8.1f} ms   "
                f"render+check {row['render_and_check_median_us'] / 1000:6.2f} ms"
            )
    document = {"schema": "tritongen.bench.convert/1", "results": results}
    print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
