"""The shipped table of thresholds: every number a check judges against, with where it comes from.

A threshold is absolute (a limit a value is held to on its own: 5 % free disk) or relative (how
far a node may stray from the others: 5 % less memory than the median node). Each row says which,
its default, and the source of the default; docs/checks.md lists them all (generated from
``THRESHOLDS``). A row may carry per-profile values (a GPU SKU's floor, keyed by the profile's
name): ``threshold(name, profile)`` gives the profile's value where there is one, else the default.

Users override any of them in ``doctor.toml`` (or ``[tool.cluster-doctor]`` in pyproject.toml):

    [thresholds.host]
    disk_free_pct = 10         # every profile
    [thresholds.rdma]
    ib_rate_gbps = 200         # an NDR200 fabric
    [thresholds."allreduce.busbw_gbps"]
    "H100 SXM" = 440           # one GPU model of a row that has them (SKUS)

doctor/cli/main.py hands the table over once per run (``set_overrides``); a name that is no row
of the table is a usage error, so a typo never passes for a setting. A check reads a value with
``limit(facts, name)`` (its node's GPU model decides a row's profile) or ``threshold(name)``, and
quotes the ``Limit`` in its evidence: the value, absolute or relative, and where it came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from doctor.core.errors import UsageError
from doctor.core.model import Missing
from doctor.judge.threshold_table import SKUS, THRESHOLDS, Kind, Sku, Threshold

if TYPE_CHECKING:
    from doctor.facts.node import NodeFacts


ALL_PROFILES = "*"  # the key of an override that applies whatever the profile
BY_NAME: dict[str, Threshold] = {t.name: t for t in THRESHOLDS}


# Overrides from the config file: threshold name -> profile (or ALL_PROFILES) -> value; and the
# file they came from. Set once per run (doctor/cli/main.py), as the output settings are.
_overrides: dict[str, dict[str, float]] = {}
_source: list[str] = [""]


@dataclass(frozen=True)
class Limit:
    """A threshold's value in effect and where it came from, as a finding quotes it."""

    name: str
    value: float
    unit: str
    kind: Kind
    source: str  # "" for the default, "the H100 SXM profile", or the config file that set it

    @property
    def shown(self) -> str:
        """20000000 → '20,000,000'; 0.9 → '0.9'."""
        return f"{int(self.value):,}" if self.value.is_integer() else f"{self.value:g}"

    def __str__(self) -> str:
        where = f"; {self.source}" if self.source else ""
        return f"{self.name} = {self.shown} {self.unit} ({self.kind}{where})"


def lookup(name: str, profile: str | None = None) -> Limit | None:
    """The value in effect: the config's for this profile, the config's for every profile, the
    table's for this profile, the table's default; None where none is (a row of profiles only)."""
    row = BY_NAME[name]  # a KeyError here is a check naming a row that does not exist
    given = _overrides.get(name, {})
    found: tuple[float, str] | None = None
    if profile is not None and profile in given:
        found = given[profile], _source[0]
    elif ALL_PROFILES in given:
        found = given[ALL_PROFILES], _source[0]
    elif profile is not None and profile in row.profiles:
        found = row.profiles[profile], f"the {profile} profile"
    elif row.default is not None:
        found = row.default, ""
    return None if found is None else Limit(name, found[0], row.unit, row.kind, found[1])


def need(name: str, profile: str | None = None) -> Limit:
    """A threshold with a default: its absence is a bug in the table."""
    found = lookup(name, profile)
    if found is None:
        raise KeyError(f"threshold {name!r} has no default")
    return found


def threshold(name: str, profile: str | None = None) -> float:
    return need(name, profile).value


def described(name: str, profile: str | None = None) -> str:
    """'host.disk_free_pct = 5 % (absolute)', for a finding's evidence."""
    return str(need(name, profile))


def sku_of(facts: NodeFacts) -> Sku | None:
    """The GPU model of the node: the first whose name every NVIDIA GPU of it matches."""
    gpus = facts.gpus
    if isinstance(gpus, Missing) or not gpus.gpus:
        return None
    names = [g.name.lower() for g in gpus.gpus if g.vendor == "nvidia"]
    for sku in SKUS:
        if names and all(any(m.lower() in n for m in sku.match) for n in names):
            return sku
    return None


def limit(facts: NodeFacts, name: str) -> Limit | None:
    """The threshold ``name`` for this node, its GPU model's where the row has one."""
    sku = sku_of(facts)
    return lookup(name, sku.name if sku else None)


def need_limit(facts: NodeFacts, name: str) -> Limit:
    sku = sku_of(facts)
    return need(name, sku.name if sku else None)


def set_overrides(table: Mapping[str, Any], source: str) -> None:
    """Take a config file's ``[thresholds]`` table (replacing any earlier one); UsageError naming
    the file and key for a name that is no threshold or a value that is no number."""
    parsed: dict[str, dict[str, float]] = {}
    _walk(table, "", parsed, source)
    _overrides.clear()
    _overrides.update(parsed)
    _source[0] = source


def _walk(
    table: Mapping[str, Any], prefix: str, out: dict[str, dict[str, float]], src: str
) -> None:
    for key, value in table.items():
        name = f"{prefix}{key}"
        if name in BY_NAME:
            if isinstance(value, Mapping):
                out[name] = {str(p): _number(v, f"{name}.{p}", src) for p, v in value.items()}
            else:
                out[name] = {ALL_PROFILES: _number(value, name, src)}
        elif isinstance(value, Mapping) and any(t.startswith(name + ".") for t in BY_NAME):
            _walk(value, name + ".", out, src)
        else:
            raise UsageError(f"{src}: unknown threshold {name!r} (see docs/checks.md, Thresholds)")


def _number(value: Any, name: str, src: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{src}: threshold {name!r} must be a number, not {value!r}")
    return float(value)
