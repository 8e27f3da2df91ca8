"""``tritongen loadtest --worker`` processes of this machine, as distributed-load tests start them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


class Worker:
    """A ``tritongen loadtest --worker`` process, its stderr in a file."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        port: int,
        wait: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.stderr_path = workdir / f"{name}.err"
        with self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tritongen", "loadtest", "--worker", "--master-host", "127.0.0.1",
                 "--master-port", str(port), "--worker-wait", wait],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                env={**os.environ, "COLUMNS": "200", **(env or {})},
            )  # fmt: skip

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def locust_pid(self) -> int:
        """The Locust worker it runs now."""
        pid = self.process.pid
        (child,) = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return int(child)

    def totals(self) -> dict[int, tuple[str, int]]:
        """Run number -> (worker id, requests it reported), as each Locust worker counted them itself."""
        line = r"^run (\d+): worker (\S+) sent (\d+) requests \(warm-up included\)$"
        found = re.findall(line, self.stderr(), re.MULTILINE)
        return {int(run): (worker, int(n)) for run, worker, n in found}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
