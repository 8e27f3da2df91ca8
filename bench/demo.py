"""``make demo`` as a newcomer runs it once installed: its wall time, each step's, and every verdict.

Runs ``make demo`` in the repository (``.venv`` installed; the examples it builds are rebuilt
only when missing), timing each of its commands as ``make`` prints it, then reads what the
demo wrote: each comparison's and the tune's rounds (``--rounds auto``: how many, why they
stopped) and every deciding pair's verdict (different, equivalent within the margin, or
undecided at a cap), with the other figure's pairs as reported (a compare's rounds decide the
figure it ranks by). Reported: the wall time against the target (8 minutes), each step's time, and the
verdicts.

Usage: ``.venv/bin/python bench/demo.py [--json bench/results/demo.json]`` (as long as the
demo: about 8 minutes on a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "build" / "demo"
SCHEMA = "tritongen.bench.demo/1"
TARGET_S = 8 * 60
STEPS = {"compare": "compare", "example": "example", "render": "render", "tune": "tune", "report": "report"}
"""The tritongen commands of the demo, by the word after ``tritongen`` in the line make prints."""
console = Console()


def step_of(line: str) -> str | None:
    """The demo step a line of make's output starts (``compare``, ``tune`` …), or None."""
    words = line.lstrip("+ ").split()
    if len(words) < 2 or not words[0].endswith("/tritongen"):
        return None
    return STEPS.get(words[1])


def run_demo() -> tuple[float, list[dict[str, Any]], int]:
    """Run ``make demo``; its wall time, each step (name, start, seconds) and its exit code."""
    began = time.monotonic()
    steps: list[dict[str, Any]] = []
    with subprocess.Popen(
        ["make", "demo"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as make:
        assert make.stdout is not None
        for line in make.stdout:
            now = time.monotonic() - began
            name = step_of(line)
            if name is not None:
                if steps:
                    steps[-1]["seconds"] = now - steps[-1]["start_s"]
                named = re.search(r"--name (\S+)", line)
                model = named.group(1) if named else None
                steps.append({"step": name, "start_s": now, "line": line.strip()[:200], "model": model})
        code = make.wait()
    wall = time.monotonic() - began
    if steps:
        steps[-1]["seconds"] = wall - steps[-1]["start_s"]
    return wall, steps, code


def verdicts(stopping: dict[str, Any] | None) -> dict[str, Any]:
    """What one set of rounds decided: rounds, why they stopped, and each pair's decision."""
    if not stopping:
        return {"rounds": None, "stopped": None, "pairs": [], "all_decided": False}

    def brief(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"pair": p["pair"], "decision": p["decision"], "text": p["text"]} for p in found]

    pairs, reported = brief(stopping["pairs"]), brief(stopping.get("other_pairs") or [])
    return {
        "rounds": stopping.get("rounds"),
        "stopped": stopping.get("stopped"),
        "decided_on": stopping.get("decided_on"),
        "pairs": pairs,
        "reported": reported,
        "all_decided": all(p["decision"] in ("different", "equivalent") for p in pairs),
    }


def read_outputs() -> dict[str, Any]:
    """The verdicts of each comparison and of the tune the demo wrote."""
    found: dict[str, Any] = {}
    for model in ("mlp", "minilm"):
        path = DEMO / model / "compare.json"
        if path.is_file():
            doc = json.loads(path.read_text())
            found[f"compare {model}"] = verdicts((doc.get("settings") or {}).get("stopping"))
    tune = DEMO / "tune.json"
    if tune.is_file():
        doc = json.loads(tune.read_text())
        found["tune mlp_onnx"] = verdicts((doc.get("confirmation") or {}).get("stopping"))
    return found


def main() -> None:
    """Run the demo, print its figures and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "demo.json")
    parser.add_argument("--conditions", help="what else ran on the machine meanwhile (stated in the table)")
    args = parser.parse_args()
    require_committed_tree(args.json)
    wall, steps, code = run_demo()
    if code != 0:
        raise SystemExit(f"make demo failed (exit {code}); nothing written")
    decided = read_outputs()
    for step in steps:
        console.print(f"{step['step']:8s} {step['seconds']:7.1f} s  {step['line'][:90]}")
    for name, found in decided.items():
        console.print(f"{name}: {found['rounds']} rounds, {found['stopped']}")
        for pair in found["pairs"]:
            console.print(f"  {pair['pair']}: {pair['text']}")
        for pair in found.get("reported") or []:
            console.print(f"  {pair['pair']}: {pair['text']} (reported, not a stopping figure)")
    console.print(f"make demo: {wall / 60:.1f} min (target at most {TARGET_S / 60:g} min)")
    document = {
        "schema": SCHEMA,
        "wall_s": wall,
        "target_s": TARGET_S,
        "meets_target": wall <= TARGET_S,
        "steps": steps,
        "verdicts": decided,
        "all_decided": all(found["all_decided"] for found in decided.values()),
        **({"conditions": args.conditions} if args.conditions else {}),
    }
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
