"""The kernel log of one node, read once: its events within the window the probe was given.

The probe reads /dev/kmsg (else ``journalctl -k``) and keeps the lines that hold a word of an
event (doctor/stages/probe.py ``read_kernel_log``), within ``--since``; a pasted dmesg, journal or
kern.log lands in slots of the same shape (doctor/paste/host.py), read whole. Where neither
source could be read the area is Missing with why (dmesg_restrict, no journal), and the checks
skip saying so: an unread log never passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.kernel.events import KernelEvent, event_of
from doctor.facts.kernel.lines import peel

SLOT = "kernel:log"  # the probe's value; a paste's are SLOT + ":<crc>"
LEGACY_XID = "kernel:xid"  # probes before this reader kept only the Xid lines of dmesg
MAX_EVENTS = 2000


@dataclass(frozen=True)
class KernelText:
    source: str  # "/dev/kmsg", "journalctl -k", "pasted"
    window: str  # "since boot", "since 2026-11-29 06:30:54 UTC", "the pasted lines"
    text: str
    truncated: bool  # more lines matched than the probe kept


@dataclass(frozen=True)
class KernelLogFacts:
    source: str
    window: str
    events: tuple[KernelEvent, ...]
    truncated: bool

    def of(self, *kinds: str) -> list[KernelEvent]:
        return [e for e in self.events if e.kind in kinds]


def _window(value: dict[str, Any]) -> str:
    since = value.get("since")
    if not isinstance(since, (int, float)):
        return "since boot"
    return "since " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))


def kernel_texts(cap: Capture) -> list[KernelText] | Missing:
    """The kernel log texts a capture holds: the probe's, or every pasted one."""
    pasted = sorted(n for n in cap.raw.get("values", {}) if n.startswith(SLOT + ":"))
    out = []
    for name in pasted:
        value = cap.value(name)
        if isinstance(value, dict) and isinstance(value.get("text"), str):
            out.append(KernelText("pasted", "the pasted lines", value["text"], False))
    if pasted:
        return out
    value = cap.value(SLOT)
    if isinstance(value, Missing):
        if "was not captured" in value.reason and LEGACY_XID in cap.raw.get("commands", {}):
            return Missing("this capture kept only the kernel log's Xid lines", "unsupported")
        if value.kind == "failed":  # the probe's LookupError: why neither source could be read
            why = value.reason.split("LookupError: ", 1)[-1]
            return Missing(f"the kernel log could not be read: {why}", "unreadable")
        return value
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return Missing("kernel:log: corrupt entry in the capture", "failed")
    matched, kept = value.get("matched"), value["text"].count("\n") + bool(value["text"])
    truncated = isinstance(matched, int) and matched > kept
    source = str(value.get("source") or "kernel log")
    return [KernelText(source, _window(value), value["text"], truncated)]


def parse_kernel(cap: Capture) -> KernelLogFacts | Missing:
    texts = kernel_texts(cap)
    if isinstance(texts, Missing):
        return texts
    events: list[KernelEvent] = []
    seen: set[tuple[str, str]] = set()
    for text in texts:
        for raw in text.text.splitlines():
            line = peel(raw)
            event = event_of(line) if line is not None else None
            if event is None:
                continue
            if event.kind == "oom_kill":  # older kernels report one kill in two lines
                key = (event.kind, event.subject)
                if key in seen:
                    continue
                seen.add(key)
            events.append(event)
    first = texts[0] if texts else KernelText("pasted", "the pasted lines", "", False)
    return KernelLogFacts(
        first.source,
        first.window,
        tuple(events[-MAX_EVENTS:]),
        any(t.truncated for t in texts) or len(events) > MAX_EVENTS,
    )
