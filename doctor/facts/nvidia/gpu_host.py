"""GPU health the node shows outside the GPUs: Xid events in the kernel log, the fabric manager.

Xid lines are the driver's error reports ("NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has
fallen off the bus."; with a MIG instance "(PCI:0000:01:00 GPU-I:05)"), as dmesg and journalctl
print them, with whatever prefix they add. They are read from the one kernel log the node's
capture holds (doctor/facts/kernel/log.py), within its window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words
from doctor.facts.kernel.log import LEGACY_XID, kernel_texts
from doctor.facts.nvidia.gpu_vitals import corrupt_inforoms

FABRIC_MANAGER = "nvidia:fabricmanager"  # pids of running nv-fabricmanager processes
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
    r"(?: GPU-I:\d+)?\)"
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
    """The Xid lines of the node's kernel log; a capture of a probe older than the kernel log
    reader kept them alone, as the output of `dmesg`."""
    texts = kernel_texts(cap)
    probed = not isinstance(texts, Missing) and any(t.source != "pasted" for t in texts)
    fabric = cap.value(FABRIC_MANAGER)
    if probed and isinstance(fabric, Missing) and fabric.kind == "unsupported":
        # The probe looks for NVIDIA's daemons only where NVIDIA hardware is: a log of a node
        # without any holds no Xid, and judging it would pass on nothing.
        return Missing("no NVIDIA kernel module and no NVIDIA PCI device here", "absent")
    if not isinstance(texts, Missing):
        return tuple(e for t in texts for e in parse_xid(t.text))[-MAX_EVENTS:]
    result = cap.command(LEGACY_XID)
    if isinstance(result, Missing):
        return texts
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
