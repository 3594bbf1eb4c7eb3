"""An RDMA port's counters: the IB PortCounters the kernel shows in ``counters/``, the driver's
own in ``hw_counters/``, a second sample of both where the probe took one, and `perfquery`.

sysfs names follow the kernel (drivers/infiniband/core/sysfs.c: ``symbol_error``,
``link_downed``, ...); `perfquery` prints the same PortCounters by their IBA names
(libibmad/fields.c: ``SymbolErrorCounter:........0``) under a header naming the LID and port
(infiniband-diags/perfquery.c: ``# Port counters: Lid 5 port 1 (CapMask: 0x5A00)``, or
``# Port extended counters: ...`` for ``-x``). A counter that was not shown is absent, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from doctor.core.capture import Capture, CommandResult

FOLDERS = ("counters", "hw_counters")
# Where the probe keeps its second sample: {"seconds": s, "files": {path: text}}.
LATER = "rdma:counters-later"
PERFQUERY_SLOT = "perfquery"  # a pasted perfquery output lands in "perfquery:<crc>"
# The error counters of the IBA PortCounters attribute, by perfquery's name → sysfs's name.
PERFQUERY_NAMES = {
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
}
_HEADER = re.compile(
    r"^#\s*Port (?:extended )?counters:\s*(?:Lid\s+(?P<lid>\d+))?.*?\bport\s+(?P<port>\d+)", re.I
)
_FIELD = re.compile(r"^\s*(?P<name>[A-Za-z0-9]+):\.*\s*(?P<value>\d+)\s*$")
MAX_VALUE = 1 << 64


@dataclass(frozen=True)
class PortCounters:
    """One port's counters by sysfs name; ``later`` the same names read ``seconds`` after."""

    values: Mapping[str, int] = field(default_factory=dict)
    source: str = "sysfs"  # "sysfs" or "perfquery"
    later: Mapping[str, int] = field(default_factory=dict)
    seconds: float | None = None

    def increase(self, name: str) -> int | None:
        """How much a counter grew between the two samples (None: no second sample)."""
        if name not in self.values or name not in self.later:
            return None
        return max(0, self.later[name] - self.values[name])

    def rate(self, name: str) -> float | None:
        """Its growth per second between the two samples."""
        grew = self.increase(name)
        return None if grew is None or not self.seconds else grew / self.seconds


def _number(text: object) -> int | None:
    if not isinstance(text, str):
        return None
    text = text.strip()
    return int(text) if text.isdigit() and int(text) < MAX_VALUE else None


def sysfs_counters(cap: Capture, port_dir: str) -> PortCounters | None:
    """A port's counters/ and hw_counters/ files, and the probe's second sample of them."""
    values: dict[str, int] = {}
    later: dict[str, int] = {}
    sample = cap.value(LATER)
    files = sample.get("files") if isinstance(sample, dict) else None
    for folder in FOLDERS:
        listing = cap.dir(f"{port_dir}/{folder}")
        for name in listing if isinstance(listing, list) else []:
            path = f"{port_dir}/{folder}/{name}"
            value = _number(cap.file(path))
            if value is None:
                continue
            key = name if folder == "counters" else f"hw:{name}"
            values[key] = value
            again = _number(files.get(path)) if isinstance(files, dict) else None
            if again is not None:
                later[key] = again
    if not values:
        return None
    seconds = sample.get("seconds") if isinstance(sample, dict) and later else None
    return PortCounters(
        values, "sysfs", later, float(seconds) if isinstance(seconds, (int, float)) else None
    )


def parse_perfquery(text: str) -> dict[tuple[int | None, int], dict[str, int]]:
    """Every block of a `perfquery` output by (LID, port): its counters by sysfs name."""
    blocks: dict[tuple[int | None, int], dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines()[:20_000]:
        if header := _HEADER.match(line.strip()):
            lid = int(header["lid"]) if header["lid"] else None
            current = blocks.setdefault((lid, int(header["port"])), {})
            continue
        m = _FIELD.match(line)
        if m is None or current is None:
            continue
        name = PERFQUERY_NAMES.get(m["name"])
        if name is not None and int(m["value"]) < MAX_VALUE:
            current[name] = max(current.get(name, 0), int(m["value"]))
    return blocks


def pasted_perfquery(cap: Capture) -> list[tuple[int | None, int, PortCounters]]:
    """Every port the pasted perfquery outputs show, by LID and port. Blocks of one port (the
    basic and the extended ``-x`` counters, in whatever order they were pasted) merge: a counter
    only grows, so the larger reading is the later or the wider (64-bit) one."""
    merged: dict[tuple[int | None, int], dict[str, int]] = {}
    for name in (n for n in cap.raw.get("commands", {}) if n.startswith(PERFQUERY_SLOT + ":")):
        result = cap.command(name)
        if not isinstance(result, CommandResult):
            continue
        for key, values in parse_perfquery(result.stdout).items():
            into = merged.setdefault(key, {})
            for counter, value in values.items():
                into[counter] = max(into.get(counter, 0), value)
    return [
        (lid, port, PortCounters(values, "perfquery"))
        for (lid, port), values in sorted(merged.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1]))
        if values
    ]
