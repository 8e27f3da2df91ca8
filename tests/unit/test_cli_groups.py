"""Option groups: declared once, taken whole or in part by a command, received as one typed object."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from tritongen.cli.main import app as tritongen_app
from tritongen.cli.options.groups import Pick, option_groups
from tritongen.cli.options.settings import settings


@dataclass(frozen=True)
class Speed:
    """A group for the tests."""

    level: Annotated[int, typer.Option("--level", help="How fast.")] = 1
    label: Annotated[str, typer.Option("--label", help="What to call it.")] = "slow"


def _app(pick: Pick) -> tuple[typer.Typer, list[Speed]]:
    received: list[Speed] = []
    app = typer.Typer()

    @app.command()
    @option_groups(speed=pick)
    def run(name: Annotated[str, typer.Argument()], speed: Speed, loud: bool = False) -> None:
        received.append(speed)
        print(name, loud)

    @app.command()
    def other() -> None:  # a second command keeps Typer from folding the app into one
        pass

    return app, received


def test_a_group_arrives_as_one_typed_object() -> None:
    app, received = _app(Pick())
    result = CliRunner().invoke(app, ["run", "x", "--level", "3", "--label", "fast", "--loud"])
    assert result.exit_code == 0, result.output
    assert received == [Speed(level=3, label="fast")]
    assert result.output.strip() == "x True"


def test_a_command_can_take_part_of_a_group_with_its_own_defaults_and_help() -> None:
    app, received = _app(Pick(only=("level",), defaults={"level": 7}, helps={"level": "Faster than light."}))
    assert CliRunner().invoke(app, ["run", "x"]).exit_code == 0
    assert received == [Speed(level=7, label="slow")]
    refused = CliRunner().invoke(app, ["run", "x", "--label", "fast"])
    assert refused.exit_code == 2  # --label is not offered by this command
    shown = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "Faster than light." in shown and "How fast." not in shown


def test_picking_a_group_the_command_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="no option group"):

        @option_groups(speed=Pick())
        def command(name: str) -> None:
            pass


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            "loadtest",
            ["--concurrency", "--rate", "--duration", "--warmup", "--rounds", "--json", "--csv", "--plot"],
        ),
        ("tune", ["--concurrency", "--rate", "--duration", "--warmup", "--rounds", "--json", "--plot"]),
        (
            "compare",
            ["--concurrency", "--duration", "--warmup", "--rounds", "--json", "--markdown", "--precision"],
        ),
        ("convert", ["--precision", "--keep-fp32", "--max-batch-size", "--json", "--html", "--dry-run"]),
        ("render", ["--max-batch-size", "--preferred-batch-sizes", "--instances"]),
    ],
)
def test_shared_groups_reach_every_command_that_takes_them(command: str, options: list[str]) -> None:
    shown = CliRunner().invoke(tritongen_app, [command, "--help"], env={"COLUMNS": "250"}).output
    missing = [option for option in options if option not in shown]
    assert missing == []


@dataclass(frozen=True)
class Wanted:
    """Settings for the tests: what a workflow takes."""

    level: int
    label: str = "none"
    speed_kmh: float = 0.0


def test_settings_take_each_field_from_the_option_of_that_name() -> None:
    made = settings(Wanted, Speed(level=3, label="fast"), speed_kmh=4.5)
    assert made == Wanted(level=3, label="fast", speed_kmh=4.5)
    assert settings(Wanted, Speed(), label="given") == Wanted(level=1, label="given")  # given wins
    assert settings(Wanted, Speed(level=7), Speed(level=9)).level == 7  # the first group wins


def test_settings_take_a_prefix_and_a_choice_by_its_value() -> None:
    class Colour(str, Enum):
        red = "red"

    @dataclass(frozen=True)
    class Flags:
        tvm_level: int = 2
        tvm_label: Colour = Colour.red
        level: int = 99  # no prefix: not taken

    assert settings(Wanted, Flags(), prefix="tvm_") == Wanted(level=2, label="red")


def test_settings_refuse_a_field_the_settings_do_not_have() -> None:
    with pytest.raises(TypeError, match=r"Wanted has no field \['lvl'\]"):
        settings(Wanted, Speed(), lvl=2)
    with pytest.raises(TypeError, match="not a dataclass"):
        settings(dict, Speed())  # type: ignore[type-var]
