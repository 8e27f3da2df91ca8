"""``tritongen render``: change an existing model's config.pbtxt with new batching settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.boundary import user_errors
from tritongen.cli.config_change import ShowDiff, show_diff
from tritongen.cli.console import say
from tritongen.cli.options.batching import BatchingFlags
from tritongen.cli.options.groups import option_groups
from tritongen.cli.options.shared import Templates
from tritongen.pipeline.gpu_kind import check_render_kind
from tritongen.pipeline.rerender import plan_rerender, write_rerender


@option_groups()
def render_command(
    model_dir: Annotated[
        Path, typer.Argument(help="Model directory holding config.pbtxt.", show_default=False)
    ],
    batching: BatchingFlags,
    templates: Templates = None,
    diff: ShowDiff = False,
    rewrite: Annotated[
        bool,
        typer.Option(
            "--rewrite",
            help="Render the whole file from the templates even where it was written by hand "
            "(its comments and layout are not kept).",
        ),
    ] = False,
) -> None:
    """Change MODEL_DIR/config.pbtxt in place (the old one is kept as config.pbtxt.bak).

    A config written by hand keeps every comment, blank line and layout choice: only the
    fields whose values change are touched. A config tritongen generated is rendered again
    from the templates. Nothing is written when nothing changes.
    """
    options = batching.options()
    with user_errors():
        check_render_kind(model_dir, options.kind)
        plan = plan_rerender(model_dir, options, templates, rewrite=rewrite)
        if not diff:
            write_rerender(plan)
    if diff:
        show_diff(plan)
    else:
        say(plan.summary())
