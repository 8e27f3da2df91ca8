"""``tritongen render``: rewrite an existing model's config.pbtxt with new batching settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.build.gpu_kind import check_render_kind
from tritongen.cli.batching_options import BatchingFlags
from tritongen.cli.common import console, user_errors
from tritongen.cli.convert import describe_batching, describe_instances
from tritongen.cli.groups import option_groups
from tritongen.cli.options import Templates
from tritongen.triton.rerender import rerender_model


@option_groups()
def render_command(
    model_dir: Annotated[
        Path, typer.Argument(help="Model directory holding config.pbtxt.", show_default=False)
    ],
    batching: BatchingFlags,
    templates: Templates = None,
) -> None:
    """Rewrite MODEL_DIR/config.pbtxt in place (the old one is kept as config.pbtxt.bak)."""
    options = batching.options()
    with user_errors():
        check_render_kind(model_dir, options.kind)
        config = rerender_model(model_dir, options, templates)
    console.print(
        f"rewrote {model_dir / 'config.pbtxt'}: max batch {config.max_batch_size}, "
        f"dynamic batching {describe_batching(config)}, instances {describe_instances(config)} "
        f"(previous config in config.pbtxt.bak)",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
