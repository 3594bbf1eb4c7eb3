"""What the kernel log checks share: the node's log (or the reason it could not be read), and
its events shown as evidence with the window they were read in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from doctor.core.shell import command
from doctor.facts.kernel.events import KernelEvent
from doctor.facts.kernel.log import KernelLogFacts
from doctor.facts.node import NodeFacts
from doctor.plugin import need

EVIDENCE = 8  # lines shown per finding; the count says how many there were
DMESG = command("sudo dmesg -T | tail -n 200")


def kernel_log(facts: NodeFacts) -> KernelLogFacts:
    return need(facts.kernel, "kernel log")


def seen(log: KernelLogFacts, events: list[KernelEvent]) -> tuple[str, ...]:
    """The last few lines, each with its time since boot where known, then where they came from."""
    shown = [
        (f"[{e.stamp:.0f}s] " if e.stamp is not None else "")
        + (f"{e.subject}: " if e.subject else "")
        + e.detail
        for e in events[-EVIDENCE:]
    ]
    more = f", {len(events)} in all" if len(events) > EVIDENCE else ""
    cut = ", the oldest dropped (more matched than the probe keeps)" if log.truncated else ""
    return (*shown, f"kernel log: {log.source}, {log.window}{more}{cut}")


def subjects(events: Iterable[KernelEvent]) -> str:
    counts = Counter(e.subject or "?" for e in events)
    return ", ".join(f"{s} ({n})" if n > 1 else s for s, n in counts.most_common(6))
