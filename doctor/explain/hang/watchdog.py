"""One line of what PyTorch's collective watchdog and its kin print, read into what it says:
which rank and process group, the work that timed out or failed, the group's last enqueued and
completed works, the other ranks it names. hang/written.py builds every rank's picture of a hung
job from them; hang/watchdog_wordings.py holds the wordings of every version.

A line is read after its wrapping is peeled (logline.strip_prefixes). Where a second writer's line
was spliced into it, only the first writer's part is read, and nothing the splice cut short
counts: a number that runs into it, a field without its comma. Nor is the line's host taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.logline import Origin, splice_at
from doctor.explain.hang.watchdog_wordings import (
    AT_WORK,
    COMPLETED,
    ENQUEUED,
    FIELD,
    KEYWORDS,
    OTHER_RANK,
    OWNER,
    RAN,
    WORDINGS,
)

__all__ = ["KEYWORDS", "WatchdogLine", "read_watchdog"]

# Each phrase searched alone, where its literal part is in the line: one alternation of them all
# costs every position of a line every phrase's first step.
_PHRASES = [
    (kind, keyword, re.compile(phrase), re.compile(detail) if detail else None)
    for kind, keyword, phrase, detail in WORDINGS
]
_NAMES = {
    "SeqNum": "seq",
    "SequenceNumber": "seq",
    "OpType": "op",
    "NumelIn": "numel_in",
    "NumelOut": "numel_out",
    "Timeout(ms)": "ms",
}
# The owner's bracket stands just before its sentence; a watchdog line is at most a few hundred
# characters, and one read no further than this (a pasted blob's endless line) stays cheap.
_OWNER_REACH = 240
_MAX_READ = 8192


@dataclass(frozen=True)
class WatchdogLine:
    """What one line says. ``kind``: timeout (a work ran past its timeout: the watchdog's, or a
    blocking wait's), failure (the watchdog found a work failed; or another rank's error, that
    rank in ``peers``), timeout_at (which work timed out, with the group's counts), dump (a
    Flight Recorder dump signal; ``peers``: the rank it came from), heartbeat (the watchdog
    itself stuck), abort (the communicator aborted, the process taken down), status (the
    periodic counts), desync (TORCH_NCCL_DESYNC_DEBUG's report; ``peers``: the ranks it says
    lag), barrier (Gloo's monitoredBarrier; ``peers``: the ranks that did not pass), mismatch
    (ProcessGroupWrapper's fingerprints differ; ``peers``: the other rank), io_timeout (Gloo's
    transport waited past its timeout).

    ``rank`` is the one the line names (``[Rank N]``, ``[PG ... Rank N]``, ``on rank N``): the
    rank in its process group, the global one in the default group; else the line's launcher
    label's (``origin.rank``)."""

    kind: str
    rank: int | None
    group: str | None  # the group's global name (PG GUID, 2.4's "[PG name"), else its index
    group_name: str | None  # its description: default_pg, TP, ...
    seq: int | None
    op: str | None
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int | None
    enqueued: int | None
    completed: int | None
    pid: int | None
    host: str | None
    peers: tuple[int, ...] = ()


def read_watchdog(message: str, origin: Origin) -> WatchdogLine | None:
    """What ``message`` (a line's rest after strip_prefixes) says, or None if it is no such line."""
    if not any(k in message for k in KEYWORDS):
        return None
    cut = splice_at(message)
    head = message[: cut if cut >= 0 else _MAX_READ][:_MAX_READ]
    short = cut >= 0 or len(message) > _MAX_READ  # its end is not the writer's
    first = None  # the sentence that starts first: a later one is quoted in it
    for kind, keyword, phrase, detail in _PHRASES:
        m = phrase.search(head) if keyword in head else None
        if m is not None and (first is None or m.start() < first[0]):
            first = (m.start(), kind, detail)
    if first is None:
        return None
    start, kind, detail = first
    said = _Said(head, short)
    if detail is not None and (d := detail.match(head, start)) is not None:
        said.take(d)
    stop = head.find(OTHER_RANK, start)
    for f in FIELD.finditer(head, start, len(head) if stop < 0 else stop + 1):
        said.values.setdefault(_NAMES[f["key"]], f["value"])
    for regex in (RAN, ENQUEUED, COMPLETED, AT_WORK):
        if (found := regex.search(head, start)) is not None:
            said.take(found)
    owner = OWNER.search(head, max(0, start - _OWNER_REACH), start)
    if owner is not None:
        said.take(owner)
    return said.line(kind, origin, owner, cut >= 0)


class _Said:
    """The values a line gave, first found first kept, and what was cut short left out."""

    def __init__(self, head: str, short: bool) -> None:
        self.values: dict[str, str] = {}
        self.end = len(head) if short else -1  # where a value running to it was cut

    def take(self, m: re.Match[str]) -> None:
        for name, value in m.groupdict().items():
            if value is not None and m.end(name) != self.end:
                self.values.setdefault(name, value)

    def number(self, name: str) -> int | None:
        value = self.values.get(name)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    def line(
        self, kind: str, origin: Origin, owner: re.Match[str] | None, spliced: bool
    ) -> WatchdogLine:
        rank = self.number("rank")
        ms = self.number("ms")
        secs = self.number("secs")
        peers = self.values.get("peers", "")
        return WatchdogLine(
            kind=kind,
            rank=rank if rank is not None else origin.rank,
            group=(owner["guid"] or owner["pg"]) if owner is not None else None,
            group_name=owner["desc"] if owner is not None else None,
            seq=self.number("seq"),
            op=self.values.get("op"),
            numel_in=self.number("numel_in"),
            numel_out=self.number("numel_out"),
            timeout_ms=ms if ms is not None else (secs * 1000 if secs is not None else None),
            ran_ms=self.number("ran"),
            enqueued=self.number("enqueued"),
            completed=self.number("completed"),
            pid=None if spliced else origin.pid,
            host=None if spliced else origin.host,
            peers=tuple(int(p) for p in peers.split(", ") if p.isdigit()),
        )
