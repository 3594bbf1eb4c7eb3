"""PyTorch's Flight Recorder across ranks: which rank lags, and which called a different
collective (or the same one with other sizes) at the same step.

Each rank's dump (read on its node by the stacks agent, trimmed) lists its newest collectives per
process group with a sequence number, the op (``nccl:all_reduce``), the input sizes, the state
(scheduled, started, completed) and the Python frames that called it; ``pg_status`` says up to
which sequence number it enqueued and completed. Ranks of one group call the same collectives in
the same order, so at one sequence number they must agree; a rank whose last enqueued number is
below the others' has not reached the collective they wait in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.facts.hang.stacks import Frame, JobProcess

LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen")


@dataclass(frozen=True)
class Collective:
    group: str  # the process group's id
    seq: int
    op: str  # all_reduce, broadcast, ...
    sizes: str  # "[[1024]]"
    state: str  # scheduled, started, completed
    site: Frame | None  # the user's line that called it

    def describe(self) -> str:
        where = f" at {self.site.where()}" if self.site else ""
        return f"{self.op} #{self.seq} {self.sizes}{where}"


@dataclass(frozen=True)
class Lag:
    process: JobProcess
    group: str
    enqueued: int  # the last collective this rank enqueued
    others: int  # the furthest another rank enqueued


@dataclass(frozen=True)
class Mismatch:
    group: str
    seq: int
    sides: dict[str, list[JobProcess]]  # what was called ("all_reduce [[1024]] at x.py:3") -> who
    what: str  # "op" or "sizes"


@dataclass(frozen=True)
class FlightView:
    lags: list[Lag]
    mismatches: list[Mismatch]
    pending: dict[int, Collective]  # pid -> the collective it waits in (not completed)


def _site(frames: list[dict[str, Any]]) -> Frame | None:
    parsed = [
        Frame(str(f.get("name")), str(f.get("filename")), int(f.get("line") or 0)) for f in frames
    ]
    user = [f for f in parsed if not any(m in f.file for m in LIBRARY)]
    return user[0] if user else (parsed[-1] if parsed else None)


def collectives(dump: dict[str, Any]) -> dict[str, dict[int, Collective]]:
    """group -> sequence number -> collective (point-to-point entries left out)."""
    out: dict[str, dict[int, Collective]] = {}
    for entry in dump.get("entries") or []:
        if entry.get("is_p2p"):
            continue
        group = str((entry.get("process_group") or ["?"])[0])
        seq = int(entry.get("collective_seq_id") or 0)
        op = str(entry.get("profiling_name") or "?").split(":")[-1]
        sizes = str(entry.get("input_sizes")).replace(" ", "")
        state = str(entry.get("state") or "?")
        out.setdefault(group, {})[seq] = Collective(
            group, seq, op, sizes, state, _site(entry.get("frames") or [])
        )
    return out


def enqueued(dump: dict[str, Any], group: str, seen: dict[int, Collective]) -> int:
    status = (dump.get("pg_status") or {}).get(group) or {}
    value = status.get("last_enqueued_collective")
    if isinstance(value, (int, str)) and str(value).lstrip("-").isdigit():
        return int(value)
    return max(seen, default=0)


def compare(ranks: list[JobProcess]) -> FlightView:
    """The ranks with a dump, side by side, group by group."""
    dumped = [(p, p.flight) for p in ranks if p.flight]
    per_rank = {p.pid: collectives(d) for p, d in dumped}
    lags: list[Lag] = []
    mismatches: list[Mismatch] = []
    pending: dict[int, Collective] = {}
    groups = sorted({g for c in per_rank.values() for g in c})
    for group in groups:
        members = [(p, d) for p, d in dumped if group in per_rank[p.pid]]
        marks = {p.pid: enqueued(d, group, per_rank[p.pid][group]) for p, d in members}
        furthest = max(marks.values(), default=0)
        lags += [
            Lag(p, group, marks[p.pid], furthest) for p, _ in members if marks[p.pid] < furthest
        ]
        for p, _ in members:
            mine = per_rank[p.pid][group]
            last = mine.get(marks[p.pid])
            if last is not None and last.state != "completed":
                pending[p.pid] = last
        if len(members) > 1:
            mismatches += _disagreements(group, members, per_rank, marks)
    return FlightView(lags, mismatches, pending)


def _disagreements(
    group: str,
    members: list[tuple[JobProcess, dict[str, Any]]],
    per_rank: dict[int, dict[str, dict[int, Collective]]],
    marks: dict[int, int],
) -> list[Mismatch]:
    """At the newest number every rank enqueued, the ranks must have called the same thing."""
    common = min(marks.values())
    found = []
    for seq in sorted({common, *marks.values()}):
        calls = {p.pid: per_rank[p.pid][group].get(seq) for p, _ in members}
        known = {pid: c for pid, c in calls.items() if c is not None}
        if len(known) < 2:
            continue
        for what, key in (("op", lambda c: c.op), ("sizes", lambda c: f"{c.op} {c.sizes}")):
            sides: dict[str, list[JobProcess]] = {}
            for p, _ in members:
                c = known.get(p.pid)
                if c is not None:
                    label = key(c) + (f" at {c.site.where()}" if c.site else "")
                    sides.setdefault(label, []).append(p)
            if len({key(c) for c in known.values()}) > 1:
                found.append(Mismatch(group, seq, sides, what))
                break
    return found
