"""The example repository committed at the top of the project, built by the tool itself.

``python -m tritongen.examples.repository model_repository compose.yaml`` (or
``make example-repository``) rebuilds it; a test checks the committed copy is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tritongen.deploy.compose import ComposeSpec, render_compose
from tritongen.examples.models import write_example
from tritongen.io.files import atomic_write_text
from tritongen.pipeline.request import BuildRequest, BuildResult
from tritongen.pipeline.run import build_models
from tritongen.triton.batching import BatchingOptions

EXAMPLE_OPTIONS: dict[str, BatchingOptions] = {
    "mlp": BatchingOptions(preferred_batch_sizes=(4, 8, 16), max_queue_delay_us=500),
    "text": BatchingOptions(max_batch_size=16),
    "fixed": BatchingOptions(),
}


def build_example_repository(repo: Path, sources_dir: Path) -> list[BuildResult]:
    """Write the example sources into ``sources_dir`` and convert each into ``repo``."""
    results = []
    for name, options in EXAMPLE_OPTIONS.items():
        source = write_example(name, sources_dir / f"{name}.onnx")
        request = BuildRequest(source=source, name=name, repo=repo, options=options, force=True)
        results.append(build_models(request))
    return results


def main(argv: list[str]) -> int:
    """Rebuild the example repository and its compose file."""
    repo = Path(argv[0]) if argv else Path("model_repository")
    compose = Path(argv[1]) if len(argv) > 1 else Path("compose.yaml")
    build_example_repository(repo, Path("build/examples"))
    atomic_write_text(compose, render_compose(ComposeSpec(repo=repo, output=compose)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
