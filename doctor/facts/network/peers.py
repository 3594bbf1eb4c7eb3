"""How one node sees the cluster's names, and which cluster-doctor (if any) it has installed."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing

PREFIX = "resolve:"


@dataclass(frozen=True)
class PeerFacts:
    # name -> the addresses getaddrinfo gave on this node, or why it gave none
    resolved: dict[str, tuple[str, ...] | Missing]
    doctor_version: str | Missing | None  # None: not installed on the node


def parse_peers(cap: Capture) -> PeerFacts | Missing:
    names = [key[len(PREFIX) :] for key in cap.raw.get("values", {}) if key.startswith(PREFIX)]
    if not names:
        return Missing("the probe did not resolve any names (an older probe?)", "unsupported")
    resolved: dict[str, tuple[str, ...] | Missing] = {}
    for name in names:
        value = cap.value(PREFIX + name)
        resolved[name] = value if isinstance(value, Missing) else tuple(value)
    return PeerFacts(resolved, cap.value("doctor_version"))
