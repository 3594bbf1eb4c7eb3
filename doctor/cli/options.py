"""Typer options from Flag-annotated dataclasses (doctor/core/flag.py).

A command that takes ``targets: Targets`` gets one option per Flag-annotated field of Targets,
and receives them back as one Targets value; the options are declared once, on the dataclass.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from doctor.core.flag import Flag

R = TypeVar("R")


def _option(hint: Any) -> tuple[Any, Flag] | None:
    """(the field's type, its Flag) when the field is annotated with one."""
    if typing.get_origin(hint) is not Annotated:
        return None
    base, *extras = typing.get_args(hint)
    found = [e for e in extras if isinstance(e, Flag)]
    return (base, found[0]) if found else None


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    assert field.default_factory is not dataclasses.MISSING, f"{field.name} needs a default"
    return field.default_factory()


def options(command: Callable[..., R]) -> Callable[..., R]:
    """Expand every dataclass-typed parameter of ``command`` into its fields' options."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for param in inspect.signature(command).parameters.values():
        hint = hints.get(param.name, param.annotation)
        if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
            parameters.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hint))
            continue
        field_hints = typing.get_type_hints(hint, include_extras=True)
        names = []
        for field in dataclasses.fields(hint):
            found = _option(field_hints[field.name])
            if found is None:
                continue  # a setting some command fills in itself, not a flag
            base, flag = found
            option = typer.Option(
                *flag.decls, help=flag.help, min=flag.min, max=flag.max, envvar=flag.envvar
            )
            parameters.append(
                inspect.Parameter(
                    field.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=_default(field),
                    annotation=Annotated[base, option],
                )
            )
            names.append(field.name)
        groups[param.name] = (hint, names)

    @functools.wraps(command)
    def run(**kwargs: Any) -> R:
        for name, (cls, fields) in groups.items():
            kwargs[name] = cls(**{f: kwargs.pop(f) for f in fields})
        return command(**kwargs)

    returns = hints.get("return", inspect.Signature.empty)
    run.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    return run
