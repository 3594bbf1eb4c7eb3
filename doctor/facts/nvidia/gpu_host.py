"""GPU health the node shows outside the GPUs: Xid events in the kernel log, the fabric manager.

Xid lines are the driver's error reports ("NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has
fallen off the bus."), as dmesg and journalctl print them, with whatever prefix they add. The
probe keeps only those lines of `dmesg`, and only where the kernel lets this user read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words
from doctor.facts.nvidia.gpu_vitals import corrupt_inforoms

XID_SLOT = "kernel:xid"
XID_ARGV = ("dmesg",)
FABRIC_MANAGER = "nvidia:fabricmanager"  # pids of running nv-fabricmanager processes
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\)"
    r"\s*:?\s*(?P<code>\d+)\s*,?\s*(?P<detail>.*)$"
)
MAX_EVENTS = 500


@dataclass(frozen=True)
class XidEvent:
    bus_id: str  # as the driver printed it, lower case: "0000:3b:00" (no function)
    code: int
    detail: str


@dataclass(frozen=True)
class GpuHostFacts:
    xid: tuple[XidEvent, ...] | Missing  # the driver's error reports in the kernel log
    fabric_manager: bool | Missing  # an nv-fabricmanager process runs
    # GPUs (bus ids) nvidia-smi warned have a corrupted InfoROM, in any output of it captured.
    inforom_corrupt: tuple[str, ...] = ()


def parse_xid(text: str) -> tuple[XidEvent, ...]:
    """Every Xid line of a kernel log (the last MAX_EVENTS), whatever precedes "NVRM:"."""
    events = []
    for line in text.splitlines()[-200_000:]:
        m = _XID.search(line.rstrip("\r")) if "Xid" in line else None
        if m:
            detail = m.group("detail").strip()[:300]
            events.append(XidEvent(m.group("bus").lower(), int(m.group("code")), detail))
    return tuple(events[-MAX_EVENTS:])


def _xid(cap: Capture) -> tuple[XidEvent, ...] | Missing:
    """The probe's slot, or the pasted ones (``kernel:xid:<crc>``, one per pasted Xid line)."""
    pasted = sorted(n for n in cap.raw.get("commands", {}) if n.startswith(XID_SLOT + ":"))
    events: list[XidEvent] = []
    for name in pasted:
        result = cap.command(name)
        if not isinstance(result, Missing):
            events += parse_xid(result.stdout)
    if pasted:
        return tuple(events)
    result = cap.command(XID_SLOT)
    if isinstance(result, Missing):
        return result
    if result.rc != 0:
        why = last_words(result)
        denied = "not permitted" in why.lower()
        return Missing(
            f"the kernel log is not readable here: {why}", "unreadable" if denied else "failed"
        )
    return parse_xid(result.stdout)


def parse_gpu_host(cap: Capture) -> GpuHostFacts:
    pids = cap.value(FABRIC_MANAGER)
    fabric = pids if isinstance(pids, Missing) else bool(pids)
    return GpuHostFacts(_xid(cap), fabric, tuple(sorted(corrupt_inforoms(cap))))
