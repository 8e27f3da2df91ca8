"""The Jinja environment: built-in templates, user overrides, errors with template lines."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from tritongen import __version__
from tritongen.errors import TemplateError


def builtin_templates_dir() -> Path:
    """Return the directory of the templates shipped with tritongen."""
    return Path(str(resources.files("tritongen.templates")))


def _pbtxt_quote(value: object) -> str:
    from google.protobuf import text_encoding

    escaped: str = text_encoding.CEscape(str(value), as_utf8=True)
    return f'"{escaped}"'


@functools.lru_cache(maxsize=8)
def _environment(user_dir: str | None, html: bool = False) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(user_dir))
    loaders.append(jinja2.FileSystemLoader(str(builtin_templates_dir())))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # Pages escape every value; configs and compose files are not HTML.
        autoescape=html,
    )
    env.filters["q"] = _pbtxt_quote
    return env


def render_template(name: str, templates_dir: Path | None = None, **context: Any) -> str:
    """Render template ``name``, preferring a file of that name in ``templates_dir``.

    Raises:
        TemplateError: the template is missing, does not parse, or uses an undefined
            variable; the message names the template file and line.
    """
    if templates_dir is not None and not templates_dir.is_dir():
        raise TemplateError(
            f"templates directory {templates_dir} does not exist",
            "pass --templates a directory holding your *.j2 overrides",
        )
    env = _environment(str(templates_dir) if templates_dir is not None else None, name.endswith(".html.j2"))
    context.setdefault("tritongen_version", __version__)
    try:
        template = env.get_template(name)
        text: str = template.render(**context)
        return text
    except jinja2.TemplateNotFound as e:
        raise TemplateError(f"template {name} not found", "restore it or remove it from --templates") from e
    except jinja2.TemplateSyntaxError as e:
        where = f"{e.filename or name}:{e.lineno}"
        raise TemplateError(
            f"template {where} has a syntax error: {e.message}", "fix the template at that line"
        ) from e
    except jinja2.UndefinedError as e:
        raise TemplateError(
            f"template {_failing_location(e, name)} uses an undefined variable: {e.message}",
            f"use only the variables documented at the top of {name}",
        ) from e


def _failing_location(error: BaseException, name: str) -> str:
    """Find the template file and line from the traceback Jinja rewrote for us."""
    tb = error.__traceback__
    where = name
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(".j2"):
            where = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where
