"""The winner's engine settings written into the model's config.pbtxt (``--apply``), the rest as written.

The file is edited in place: only the four parameters change, comments and layout stay, the
old file is kept as ``config.pbtxt.bak``. The settings loaded on the server during the tune
(the sibling ran them), so the edit is not loaded again before it is written.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.pipeline.rerender import Rerender
from tritongen.triton.pbtxt.edit import edit_text
from tritongen.triton.pbtxt.patch import describe_changes
from tritongen.triton.proto import parse_config_text, parse_model_config, read_config_text
from tritongen.tune.llm.space import EngineCandidate


def plan_llm_apply(model_dir: Path, winner: EngineCandidate) -> Rerender:
    """The edit of ``model_dir/config.pbtxt`` that gives it ``winner``'s settings (not written).

    Raises:
        TritongenError: the config cannot be read or parsed.
    """
    path = model_dir / "config.pbtxt"
    before = read_config_text(path)
    old = parse_model_config(before)
    new = parse_model_config(before)
    for key, value in winner.parameters().items():
        new.parameters[key].string_value = value
    after = edit_text(before, old, new)
    config = parse_config_text(after, str(path), default_name=model_dir.name)
    return Rerender(path, config, before, after, "edit", tuple(describe_changes(old, new)))
