"""A command-line flag declared where the setting it fills is declared.

Request dataclasses annotate their fields ``Annotated[T, Flag("--name", help=...)]``; the CLI
turns every such field into an option of each command that takes the dataclass. So a setting
shared by several commands is declared once, and the pipeline's types need no CLI library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    decls: tuple[str, ...]  # "--hosts", "-H"; "--mesh/--no-mesh" for a switch pair
    help: str
    min: float | None = None
    max: float | None = None
    envvar: str | None = None  # the environment variable that gives its default, if any


def flag(
    *decls: str,
    help: str,
    min: float | None = None,
    max: float | None = None,
    envvar: str | None = None,
) -> Flag:
    return Flag(decls, help, min, max, envvar)
