"""``tritongen compose``: a docker compose file for a GPU host."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import say
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.output import OutputPath
from tritongen.cli.options.shared import Image, Templates
from tritongen.deploy.compose import ComposeSpec, render_compose
from tritongen.io.files import atomic_write_text


def compose_command(
    repo: Annotated[Path, typer.Argument(help="Model repository to serve.")] = Path("model_repository"),
    output: Annotated[Path, reworded(OutputPath, "Where to write the compose file.")] = Path("compose.yaml"),
    image: Image = None,
    public: Annotated[
        bool, typer.Option("--public", help="Publish ports on every interface, not only 127.0.0.1.")
    ] = False,
    workers: Annotated[
        int, typer.Option("--locust-workers", help="Locust workers in the loadtest profile.", min=1)
    ] = 2,
    templates: Templates = None,
) -> None:
    """Write a compose file: Triton on the GPU, plus Locust master/workers (profile loadtest)."""
    with user_errors():
        spec = ComposeSpec(repo=repo, output=output, image=image, public=public, locust_workers=workers)
        text = render_compose(spec, templates)
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(output, text)
    where = "every interface" if public else "127.0.0.1"
    say(f"wrote {output} (ports 8000-8002 on {where}); start it with `docker compose -f {output} up`")
