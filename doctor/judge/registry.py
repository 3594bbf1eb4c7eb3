"""Find check plugins: the built-in ones in the ``checks`` package (its ``PLUGINS``), third-party
ones through the ``cluster_doctor.checks`` entry-point group (as pytest keeps its own plugins in a
list and finds the others by entry point)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from checks import PLUGINS
from doctor.core.errors import PluginError
from doctor.plugin import CheckSpec

GROUP = "cluster_doctor.checks"
# Set to load only the built-in checks (the ones in this distribution), like
# PYTEST_DISABLE_PLUGIN_AUTOLOAD: a broken third-party plugin can then be bypassed.
NO_AUTOLOAD = "CLUSTER_DOCTOR_DISABLE_PLUGIN_AUTOLOAD"
# An install made before the built-ins left the entry-point group still names them there.
BUILTIN_PREFIX = "checks."


def _plugins() -> list[tuple[str, str, EntryPoint | None]]:
    """(name, where, its entry point) of every plugin, a built-in's entry point None."""
    found: list[tuple[str, str, EntryPoint | None]] = [(n, f"checks.{n}", None) for n in PLUGINS]
    if not os.environ.get(NO_AUTOLOAD):
        found += [
            (ep.name, ep.value, ep)
            for ep in entry_points(group=GROUP)
            if not ep.value.startswith(BUILTIN_PREFIX)
        ]
    return sorted(found, key=lambda p: p[0])


def load_checks(plugins: Iterable[str] = ()) -> list[CheckSpec]:
    """Every check, in a stable order (plugin name, then declaration order); only those of the
    named plugins, when some are named: a command that judges one area need not import every
    plugin's facts."""
    wanted = set(plugins)
    specs: list[CheckSpec] = []
    seen: dict[str, str] = {}
    for name, where, point in _plugins():
        if wanted and name not in wanted:
            continue
        try:
            loaded = point.load() if point else importlib.import_module(where).CHECKS
        except Exception as exc:
            raise PluginError(f"check plugin {name!r} ({where}) failed to load: {exc}") from exc
        if not isinstance(loaded, (list, tuple)) or not all(
            isinstance(s, CheckSpec) for s in loaded
        ):
            raise PluginError(f"check plugin {name!r} ({where}) is not a list of checks")
        for spec in loaded:
            if spec.id in seen:
                raise PluginError(
                    f"check id {spec.id!r} is declared by both {seen[spec.id]!r} and {name!r}"
                )
            seen[spec.id] = name
            specs.append(spec)
    return specs


def _matches(check_id: str, pattern: str) -> bool:
    return check_id == pattern or check_id.startswith(pattern.rstrip(".") + ".")


def select(
    specs: Iterable[CheckSpec], include: Iterable[str] = (), exclude: Iterable[str] = ()
) -> list[CheckSpec]:
    """Keep checks whose id equals or starts with (at a dot) an include pattern, minus excludes."""
    include, exclude = list(include), list(exclude)
    specs = list(specs)
    known = {s.id for s in specs}
    for pattern in include + exclude:
        if not any(_matches(i, pattern) for i in known):
            raise ValueError(f"no check matches {pattern!r} (see 'doctor checks list')")
    return [
        s
        for s in specs
        if (not include or any(_matches(s.id, p) for p in include))
        and not any(_matches(s.id, p) for p in exclude)
    ]
