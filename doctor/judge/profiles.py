"""The thresholds checks judge against: shipped defaults and per-SKU profiles (profiles.json, each
value with its source), overridden by the run's own (``--threshold NAME=VALUE``, or ``threshold =
[...]`` in doctor.toml), which reach the checks as a fact of each node (``NodeFacts.thresholds``).

A limit is absolute: it says where it came from (the shipped default and its source, the GPU
SKU's profile, or the override), and every finding that uses one quotes it. A relative judgement
(a port slower than the node's others, a node slower than the rest) needs no table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from doctor.core.errors import UsageError
from doctor.core.model import Missing
from doctor.facts.node import NodeFacts

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles.json")
SKU_KEYS = ("busbw_gbps", "ib_rate_gbps", "ib_ports", "h2d_gbps", "p2p_gbps")


@dataclass(frozen=True)
class Limit:
    name: str
    value: float
    source: str  # where the value came from, quoted in the finding

    @property
    def shown(self) -> str:
        """20000000 → '20,000,000'; 0.9 → '0.9'."""
        return f"{int(self.value):,}" if self.value.is_integer() else f"{self.value:g}"

    def __str__(self) -> str:
        return f"{self.name} = {self.shown} ({self.source})"


@dataclass(frozen=True)
class Profile:
    name: str
    match: tuple[str, ...]  # substrings of the GPU's product name
    values: Mapping[str, float]
    source: str


@cache
def _shipped() -> dict[str, Any]:
    with open(PATH, encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def defaults() -> dict[str, Limit]:
    """Every shipped default threshold."""
    table = _shipped()["thresholds"]
    return {k: Limit(k, float(v["value"]), v["source"]) for k, v in table.items()}


def profiles() -> tuple[Profile, ...]:
    return tuple(
        Profile(
            p["name"],
            tuple(p["match"]),
            {k: float(p[k]) for k in SKU_KEYS if k in p},
            p["source"],
        )
        for p in _shipped()["gpus"]
    )


def known_names() -> set[str]:
    """The names an override may set: the defaults and the per-SKU keys (``rdma.ib_rate_gbps``
    names the profile's ``ib_rate_gbps``)."""
    return (
        set(defaults())
        | {f"rdma.{k}" for k in ("ib_rate_gbps", "ib_ports")}
        | {
            "allreduce.busbw_gbps",
            "allreduce.multinode_busbw_gbps",
        }
    )


def parse_overrides(items: Iterable[str]) -> dict[str, float]:
    """``NAME=VALUE`` strings (the --threshold flag, doctor.toml) → a map; a usage error names
    an unknown name or a value that is not a number."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in known_names():
            known = ", ".join(sorted(known_names()))
            raise UsageError(f"--threshold {item!r}: expected NAME=VALUE, NAME one of {known}")
        try:
            out[name] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {item!r}: {value.strip()!r} is not a number") from None
    return out


def gpu_profile(facts: NodeFacts) -> Profile | None:
    """The SKU profile of the node's GPUs: the first whose name every NVIDIA GPU matches."""
    gpus = facts.gpus
    if isinstance(gpus, Missing) or not gpus.gpus:
        return None
    names = [g.name for g in gpus.gpus if g.vendor == "nvidia"]
    for profile in profiles():
        if names and all(any(m.lower() in n.lower() for m in profile.match) for n in names):
            return profile
    return None


_SKU_NAMES = {
    "rdma.ib_rate_gbps": "ib_rate_gbps",
    "rdma.ib_ports": "ib_ports",
    "allreduce.busbw_gbps": "busbw_gbps",
    "gpu.h2d_gbps": "h2d_gbps",
    "gpu.p2p_gbps": "p2p_gbps",
}


def limit(facts: NodeFacts, name: str) -> Limit | None:
    """The threshold ``name`` for this node: the run's override, else the node's GPU profile's
    value (per-SKU names), else the shipped default; None where none applies."""
    overrides = facts.thresholds
    if name in overrides:
        return Limit(name, float(overrides[name]), "set for this run (--threshold / doctor.toml)")
    if name in _SKU_NAMES:
        profile = gpu_profile(facts)
        key = _SKU_NAMES[name]
        if profile is None or key not in profile.values:
            return None
        return Limit(name, profile.values[key], f"{profile.name} profile: {profile.source}")
    return defaults().get(name)


def need_limit(facts: NodeFacts, name: str) -> Limit:
    """A threshold every run has (a shipped default): its absence is a bug in profiles.json."""
    found = limit(facts, name)
    if found is None:
        raise KeyError(f"no default threshold {name!r} in {PATH}")
    return found
