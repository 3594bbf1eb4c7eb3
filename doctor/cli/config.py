"""Defaults from a config file: ``doctor.toml`` in the working directory, else the
``[tool.cluster-doctor]`` table of ``pyproject.toml``.

Keys are long option names without the dashes (``fail-on``, ``select``, ``deadline``). Top-level
keys apply to every command that has that option; a table named after a command
(``[preflight]``, or ``[checks.list]``) applies to that command only and wins over the top level.
The file only changes defaults, so a flag on the command line always wins over it. Its
``[thresholds]`` table is not an option: it overrides the shipped thresholds checks judge by
(doctor/judge/thresholds.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from doctor.core.errors import UsageError
from doctor.core.files import read_bounded

CONFIG_NAME = "doctor.toml"
MAX_CONFIG = 1 << 20  # bytes
PYPROJECT_TABLE = "cluster-doctor"
THRESHOLDS = "thresholds"


def find_config(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """The config table in effect for a working directory, and the file it came from."""
    own = folder / CONFIG_NAME
    if own.is_file():
        return own, _read(own)
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        table = _read(pyproject).get("tool", {}).get(PYPROJECT_TABLE)
        if table is not None:
            if not isinstance(table, dict):
                raise UsageError(f"{pyproject}: [tool.{PYPROJECT_TABLE}] is not a table")
            return pyproject, table
    return None


def _read(path: Path) -> dict[str, Any]:
    # Imported here: looking for a config file is the first step of every command, `doctor
    # explain`'s too, and most working directories have none (7 ms of its start).
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is 3.11+; tomli is the same parser, packaged for 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(read_bounded(path, MAX_CONFIG).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:  # tomllib decodes the whole file first
        raise UsageError(f"{path}: not valid TOML: not UTF-8 text") from None


# Commands are typed loosely: typer builds them on its own vendored copy of click, whose classes
# are not public, so these functions rely only on what every click command has (params, commands).
Command = Any


def _subcommands(command: Command) -> dict[str, Command]:
    return dict(getattr(command, "commands", None) or {})


def _options(command: Command) -> dict[str, Any]:
    """Long option name without dashes → the parameter (``fail-on`` → fail_on)."""
    out: dict[str, Any] = {}
    for param in command.params:
        if param.param_type_name != "option":
            continue
        for opt in param.opts + param.secondary_opts:
            if opt.startswith("--"):
                out[opt[2:]] = param
    return out


def default_map(root: Command, table: dict[str, Any], source: Path) -> dict[str, Any]:
    """Turn a config table into click's ``default_map`` for the command tree under ``root``.

    Raises UsageError naming the file and key when a key is no option of any command, so a typo
    in the file is an error rather than a silently ignored setting.
    """

    def build(command: Command, inherited: dict[str, Any], own: dict[str, Any]) -> dict:
        # A command's own table wins over what it inherits from the levels above it.
        settings = {**inherited, **{k: v for k, v in own.items() if not isinstance(v, dict)}}
        out: dict[str, Any] = {}
        for key, param in _options(command).items():
            if key in settings and param.name:
                out[param.name] = settings[key]
        for name, sub in _subcommands(command).items():
            sub_table = own.get(name, {})
            if isinstance(sub_table, dict):
                out[name] = build(sub, settings, sub_table)
        return out

    result = build(root, {}, table)
    unknown = _unknown_keys(root, table)
    if unknown:
        raise UsageError(f"{source}: unknown setting {unknown[0]!r} (not an option of any command)")
    return result


def _accepts(command: Command, key: str) -> bool:
    if key in _options(command):
        return True
    return any(_accepts(sub, key) for sub in _subcommands(command).values())


def _unknown_keys(command: Command, table: dict[str, Any]) -> list[str]:
    unknown = []
    for key, value in table.items():
        if isinstance(value, dict):
            sub = _subcommands(command).get(key)
            if sub is None:
                unknown.append(f"[{key}]")
            else:
                unknown.extend(_unknown_keys(sub, value))
        elif not _accepts(command, key):
            unknown.append(key)
    return unknown


def config_defaults(command: Command, folder: Path) -> dict[str, Any] | None:
    """click's default_map for ``command`` from doctor.toml / pyproject.toml in ``folder``; its
    [thresholds] table, if any, is applied to the thresholds (and none left from a file read
    before)."""
    from doctor.judge.thresholds import set_overrides

    found = find_config(folder)
    if found is None:
        set_overrides({}, "")
        return None
    path, table = found
    limits = table.get(THRESHOLDS, {})
    if not isinstance(limits, dict):
        raise UsageError(f"{path}: [{THRESHOLDS}] is not a table")
    set_overrides(limits, str(path))
    return default_map(command, {k: v for k, v in table.items() if k != THRESHOLDS}, path)
