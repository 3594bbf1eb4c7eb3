"""Defaults from a config file: ``--config FILE``, else ``doctor.toml`` in the working
directory, else the ``[tool.cluster-doctor]`` table of ``pyproject.toml`` there.

Keys are long option names without the dashes (``fail-on``, ``select``, ``deadline``). Top-level
keys apply to every command that has that option; a table named after a command
(``[preflight]``, or ``[checks.list]``) applies to that command only and wins over the top level.
The file only changes defaults, so a flag on the command line always wins over it. Its
``[thresholds]`` table is not an option: it overrides the shipped thresholds checks judge by
(doctor/judge/thresholds.py).

A file found in the working directory may be someone else's (a project folder on a shared
filesystem, often group-writable): the settings that run a program, choose how nodes are reached,
write files or weaken a check (GUARDED) are taken from it only when the file and its folder are
owned by this user (or root) and writable by no one else, the rule of OpenSSH's StrictModes and
git's safe.directory. ``--config FILE`` is trusted as the command line is. Every run that reads a
file says so on stderr, and which settings it ignored and why.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.core.errors import UsageError
from doctor.core.files import read_bounded

CONFIG_NAME = "doctor.toml"
MAX_CONFIG = 1 << 20  # bytes
PYPROJECT_TABLE = "cluster-doctor"
THRESHOLDS = "thresholds"

# Settings a file found in the working directory gives only when it is trusted, and why.
RUNS = "runs a program"
REACH = "chooses how nodes are reached"
WRITES = "writes a file"
WEAKENS = "weakens a check"
GUARDED = {
    "python": RUNS,
    "exec": RUNS,
    "recommend": RUNS,  # the allreduce's environment: LD_PRELOAD=... loads a library
    "launcher": REACH,
    "ssh-config": REACH,  # and runs its Match exec lines
    "identity": REACH,
    "known-hosts": WEAKENS,  # the host keys trusted
    "accept-new-host-keys": WEAKENS,
    "force": WEAKENS,  # launches past the gate
    "on-hang": "ends the job's processes",
    "json": WRITES,
    "junit": WRITES,
    "markdown": WRITES,
    "html": WRITES,
    "healthy-hosts": WRITES,
    "failed-hosts": WRITES,
    "save-raw": WRITES,
    "logs": WRITES,
}


@dataclass(frozen=True)
class Config:
    """The table in effect, the file it came from, and the guarded settings left out of it."""

    path: Path
    table: dict[str, Any]
    ignored: tuple[str, ...] = ()
    distrust: str = ""  # why the file is not trusted ("" when it is)

    def defaults(self, root: Any) -> dict[str, Any]:
        """click's default_map for the command tree under ``root`` (default_map below)."""
        return default_map(
            root, {k: v for k, v in self.table.items() if k != THRESHOLDS}, self.path
        )

    @property
    def thresholds(self) -> dict[str, Any]:
        """The file's [thresholds] table (doctor/judge/thresholds.py reads it)."""
        limits = self.table.get(THRESHOLDS, {})
        if not isinstance(limits, dict):
            raise UsageError(f"{self.path}: [{THRESHOLDS}] is not a table")
        return limits

    def notice(self) -> list[str]:
        """What every run says about the file on stderr."""
        lines = [f"config: read {self.path}"]
        if self.ignored:
            lines.append(
                f"config: ignored {', '.join(self.ignored)} from {self.path}: {self.distrust} "
                "(these run programs, reach nodes, write files or weaken checks; "
                "name the file with --config to trust it)"
            )
        return lines


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


def load_config(folder: Path, explicit: Path | None = None) -> Config | None:
    """The file named with --config (trusted), else the working directory's, its guarded
    settings left out unless it is trusted."""
    if explicit is not None:
        if not explicit.exists():
            raise UsageError(f"--config {explicit}: no such file")
        return Config(explicit, _read(explicit))
    found = find_config(folder)
    if found is None:
        return None
    path, table = found
    why = distrust(path)
    if not why:
        return Config(path, table)
    kept, ignored = _without_guarded(table)
    return Config(path, kept, tuple(sorted(ignored)), why)


def distrust(path: Path) -> str:
    """Why a file found in the working directory is not trusted ("" when it is): it or its folder
    (and, for a symlink, the folder of the file it names) is owned by another user, or writable
    by its group or by others."""
    me = os.geteuid()
    try:
        places = [(path, os.stat(path)), (path.parent, os.stat(path.parent))]
        if path.is_symlink():
            real = path.resolve().parent
            places.append((real, os.stat(real)))
    except OSError as exc:
        return f"cannot check {exc.filename}: {exc.strerror}"
    for place, st in places:
        if st.st_uid not in (me, 0):
            return f"{place} is owned by uid {st.st_uid}, not by this user or root"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{place} is writable by its group or by others"
    return ""


def _without_guarded(table: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The table without guarded keys at any level, and the keys left out (``[run] logs``)."""
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in table.items():
        if isinstance(value, dict):
            kept[key], inner = _without_guarded(value)
            ignored += [f"[{key}] {k}" for k in inner]
        elif key in GUARDED:
            ignored.append(key)
        else:
            kept[key] = value
    return kept, ignored


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


def config_options(root: Command) -> set[str]:
    """Every key a config file may set: the long option names of every command under ``root``."""
    names = set(_options(root))
    for sub in _subcommands(root).values():
        names |= config_options(sub)
    return names


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


def take_config_flag(args: list[str]) -> tuple[Path | None, list[str]]:
    """``--config FILE`` (or ``--config=FILE``) anywhere before ``--``, and the other args: the
    file must be known before the command line is parsed, since it gives that parse defaults."""
    rest: list[str] = []
    found: Path | None = None
    it = iter(args)
    for arg in it:
        if arg == "--":
            rest += [arg, *it]
            break
        if arg == "--config" or arg.startswith("--config="):
            value = arg.partition("=")[2] if "=" in arg else next(it, None)
            if not value:
                raise UsageError("--config needs a file")
            found = Path(value)
        else:
            rest.append(arg)
    return found, rest
