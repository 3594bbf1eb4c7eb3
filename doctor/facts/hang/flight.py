"""PyTorch's Flight Recorder across ranks: which rank lags, and which called a different
collective (or the same one with other sizes) at the same step.

Each rank's dump (read on its node by the stacks agent, trimmed) lists its newest collectives per
process group with a sequence number, the op (``nccl:all_reduce``), the input sizes, the state
(scheduled, started, completed) and the Python frames that called it; ``pg_status`` says up to
which sequence number it enqueued and completed. Ranks of one group call the same collectives in
the same order, so at one sequence number they must agree. The collective the group waits in is
the one after the furthest any rank completed (no rank completes a collective another has not
joined); a rank whose last enqueued number is below it has not reached it. A rank that enqueued
further than another is not behind: collectives are queued ahead, asynchronously, as far as the
host runs.

The same dump is what the text of a hung job is read into (doctor/explain/hang/): a watchdog's
timed-out SeqNum, last enqueued and last completed work are a rank's ``pg_status`` and entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.facts.hang.stacks import Frame, JobProcess

LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen")
Who = tuple[str, int, int | None]  # a process: its node, pid and rank (text may give no pid)


def who(process: JobProcess) -> Who:
    return (process.node, process.pid, process.rank)


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
    others: int  # the collective the others wait in (the one after the furthest completed)


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
    pending: dict[Who, Collective]  # who(rank) -> the collective it waits in (not completed)


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


def _status(dump: dict[str, Any], group: str, key: str) -> int | None:
    value = ((dump.get("pg_status") or {}).get(group) or {}).get(key)
    if isinstance(value, (int, str)) and str(value).lstrip("-").isdigit() and int(value) >= 0:
        return int(value)
    return None


def enqueued(dump: dict[str, Any], group: str, seen: dict[int, Collective]) -> int:
    value = _status(dump, group, "last_enqueued_collective")
    return max(seen, default=0) if value is None else max(value, max(seen, default=0))


def completed(dump: dict[str, Any], group: str, seen: dict[int, Collective]) -> int | None:
    """The last collective this rank completed in the group, where the dump says."""
    value = _status(dump, group, "last_completed_collective")
    if value is not None:
        return value
    done = [seq for seq, c in seen.items() if c.state == "completed"]
    if done:
        return max(done)
    waiting = [seq for seq, c in seen.items() if c.state != "completed"]
    return min(waiting) - 1 if waiting else None


def compare(ranks: list[JobProcess]) -> FlightView:
    """The ranks with a dump, side by side, group by group."""
    dumped = [(p, p.flight) for p in ranks if p.flight]
    per_rank = {who(p): collectives(d) for p, d in dumped}
    lags: list[Lag] = []
    mismatches: list[Mismatch] = []
    pending: dict[Who, Collective] = {}
    groups = sorted({g for c in per_rank.values() for g in c} | _statused(dumped))
    for group in groups:
        members = [
            (p, d)
            for p, d in dumped
            if group in per_rank[who(p)] or group in (d.get("pg_status") or {})
        ]
        mine = {who(p): per_rank[who(p)].get(group, {}) for p, _ in members}
        marks = {who(p): enqueued(d, group, mine[who(p)]) for p, d in members}
        done = {who(p): completed(d, group, mine[who(p)]) for p, d in members}
        known = [c for c in done.values() if c is not None]
        front = max(known) + 1 if known else max(marks.values(), default=0)
        # Only a collective some rank enqueued is one the group waits in (every rank done with
        # all it queued: nobody waits here).
        if max(marks.values(), default=0) >= front:
            lags += [
                Lag(p, group, marks[who(p)], front) for p, _ in members if marks[who(p)] < front
            ]
        waits = {
            who(p): c
            for p, _ in members
            if (c := _waits_in(mine[who(p)], done[who(p)], marks[who(p)])) is not None
        }
        pending.update(waits)
        if len(members) > 1:
            at = {min(marks.values()), *marks.values(), *(c.seq for c in waits.values())}
            mismatches += _disagreements(group, members, mine, sorted(at))
    return FlightView(lags, mismatches, pending)


def _statused(dumped: list[tuple[JobProcess, dict[str, Any]]]) -> set[str]:
    """Groups a dump gives a status for though it lists none of their collectives (a rank that
    enqueued nothing in them yet)."""
    return {str(g) for _, d in dumped for g in (d.get("pg_status") or {})}


def _waits_in(mine: dict[int, Collective], done: int | None, mark: int) -> Collective | None:
    """The oldest collective the rank enqueued and did not complete: what it waits in."""
    after = done if done is not None else -1
    open_ = [c for seq, c in sorted(mine.items()) if seq > after and c.state != "completed"]
    if open_:
        return open_[0]
    last = mine.get(mark)
    return last if last is not None and last.state != "completed" else None


def _disagreements(
    group: str,
    members: list[tuple[JobProcess, dict[str, Any]]],
    mine: dict[Who, dict[int, Collective]],
    at: list[int],
) -> list[Mismatch]:
    """At the numbers the ranks enqueued up to or wait in, the ranks must have called the same
    thing."""
    found = []
    for seq in at:
        calls = {who(p): mine[who(p)].get(seq) for p, _ in members}
        # A collective read from text may not say its op or sizes ("?"): it agrees with any.
        known = {pid: c for pid, c in calls.items() if c is not None and c.op != "?"}
        if len(known) < 2:
            continue
        for what, key in (("op", lambda c: c.op), ("sizes", lambda c: f"{c.op} {c.sizes}")):
            sides: dict[str, list[JobProcess]] = {}
            said = []
            for p, _ in members:
                c = known.get(who(p))
                if c is not None and (what == "op" or "?" not in c.sizes):
                    label = key(c) + (f" at {c.site.where()}" if c.site else "")
                    sides.setdefault(label, []).append(p)
                    said.append(c)
            if len({key(c) for c in said}) > 1:
                found.append(Mismatch(group, seq, sides, what))
                break
    return found
