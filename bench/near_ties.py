"""How long a tune takes to say "nothing changes" when every candidate is as fast as the current config.

The model is the batching example of Triton's Python-backend docs, written here in our own
words: no config.pbtxt (the server completes it), two FP32 inputs of 4 values, their sum and
difference as outputs, max batch 4 and the dynamic batcher on. Its work is a few additions,
so every batching or instance config the tune tries serves about as fast as the current one:
the near tie the futility rule of ``--rounds auto`` is for. ``tritongen tune`` runs as a user
runs it (the installed command, the embedded server, ``--max-trials 3 --duration 2s``), a few
times; each run's wall time, confirmation rounds, why the rounds stopped and the verdict are
written. Target: every run ends within 3 minutes here, saying that the current config stays.

Usage: ``.venv/bin/python bench/near_ties.py [--repeats 3] [--json bench/results/near_ties.json]``
(about 2 minutes per repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result

SCHEMA = "tritongen.bench.near_ties/1"
MODEL = "batch_model"
TARGET_S = 180.0
"""The issue's bound: a 3-trial tune of near-tied candidates ends within 3 minutes."""

MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for name in ("INPUT0", "INPUT1"):
            config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        for name in ("OUTPUT0", "OUTPUT1"):
            config.add_output({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        config.set_max_batch_size(4)
        config.set_dynamic_batching()
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                       pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32))]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
"""


def write_repository(root: Path) -> Path:
    """A repository holding the model alone: ``batch_model/1/model.py``, no config.pbtxt."""
    version = root / "model_repository" / MODEL / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL_PY.lstrip(), encoding="utf-8")
    return root / "model_repository"


def one_tune(repo: Path, out: Path, tritongen: str) -> dict[str, Any]:
    """Run the tune as a user would; its wall time, exit status and what its document says."""
    document = out / "tune-result.json"
    argv = [tritongen, "tune", MODEL, "--repo", str(repo), "--max-trials", "3", "--duration", "2s",
            "--out", str(out / "work"), "--json", str(document)]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    wall_s = time.monotonic() - started
    run: dict[str, Any] = {"wall_s": round(wall_s, 1), "exit_code": done.returncode}
    if not document.exists():
        run["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return run
    data = json.loads(document.read_text(encoding="utf-8"))
    confirmation = data.get("confirmation") or {}
    stopping = confirmation.get("stopping") or {}
    contenders = confirmation.get("contenders") or {}
    run.update(
        trials=len(data.get("trials", [])),
        finalists=list(data.get("finalists", [])),
        rounds_completed=confirmation.get("completed_rounds"),
        rounds_cap=confirmation.get("rounds"),
        stopped=stopping.get("stopped"),
        pairs=[
            {"pair": p.get("name"), "decision": p.get("decision"), "text": p.get("text")}
            for p in stopping.get("pairs", [])
        ],
        ratios={key: (c.get("ratio") or {}) for key, c in contenders.items() if not c.get("current")},
        decision=data.get("decision"),
        verdict=data.get("verdict"),
    )
    return run


def main(argv: list[str] | None = None) -> int:
    """Tune the near-tied model ``--repeats`` times; print each run and write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS / "near_ties.json")
    args = parser.parse_args(argv)
    require_committed_tree(args.json)
    tritongen = str(Path(sys.executable).with_name("tritongen"))
    runs = []
    for number in range(1, args.repeats + 1):
        with tempfile.TemporaryDirectory(prefix="tritongen-near-ties-") as tmp:
            repo = write_repository(Path(tmp))
            run = one_tune(repo, Path(tmp), tritongen)
        runs.append(run)
        print(
            f"tune {number}/{args.repeats}: {run['wall_s']:.0f} s, exit {run['exit_code']}, "
            f"{run.get('rounds_completed')} round(s) of at most {run.get('rounds_cap')}: "
            f"{run.get('stopped') or run.get('error')}; {run.get('verdict')}",
            flush=True,
        )
    walls = [r["wall_s"] for r in runs]
    summary = {
        "wall_s": {"min": min(walls), "median": statistics.median(walls), "max": max(walls)},
        "target_s": TARGET_S,
        "target_met": all(r["exit_code"] == 0 for r in runs) and max(walls) <= TARGET_S,
    }
    verdict = "met" if summary["target_met"] else "NOT met"
    print(
        f"wall time: min {min(walls):.0f} s, median {statistics.median(walls):.0f} s, "
        f"max {max(walls):.0f} s (target: each at most {TARGET_S:.0f} s): {verdict}"
    )
    data = {"schema": SCHEMA, "model": MODEL, "repeats": args.repeats, "runs": runs, "summary": summary}
    write_result(args.json, data, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
