"""Find check plugins through the ``cluster_doctor.checks`` entry-point group."""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.metadata import entry_points

from doctor.core.errors import PluginError
from doctor.plugin import CheckSpec

GROUP = "cluster_doctor.checks"
# Set to load only the built-in checks (the ones in this distribution), like
# PYTEST_DISABLE_PLUGIN_AUTOLOAD: a broken third-party plugin can then be bypassed.
NO_AUTOLOAD = "CLUSTER_DOCTOR_DISABLE_PLUGIN_AUTOLOAD"
BUILTIN_PREFIX = "checks."


def load_checks(plugins: Iterable[str] = ()) -> list[CheckSpec]:
    """Every registered check, in a stable order (entry-point name, then declaration order);
    only those of the named plugins (entry points), when some are named: a command that judges
    one area need not import every plugin's facts."""
    only_builtin = bool(os.environ.get(NO_AUTOLOAD))
    wanted = set(plugins)
    specs: list[CheckSpec] = []
    seen: dict[str, str] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        if (only_builtin and not ep.value.startswith(BUILTIN_PREFIX)) or (
            wanted and ep.name not in wanted
        ):
            continue
        try:
            loaded = ep.load()
        except Exception as exc:
            raise PluginError(
                f"check plugin {ep.name!r} ({ep.value}) failed to load: {exc}"
            ) from exc
        if not isinstance(loaded, (list, tuple)) or not all(
            isinstance(s, CheckSpec) for s in loaded
        ):
            raise PluginError(f"check plugin {ep.name!r} ({ep.value}) is not a list of checks")
        for spec in loaded:
            if spec.id in seen:
                raise PluginError(
                    f"check id {spec.id!r} is declared by both {seen[spec.id]!r} and {ep.name!r}"
                )
            seen[spec.id] = ep.name
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
