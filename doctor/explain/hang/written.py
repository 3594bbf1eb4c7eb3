"""What a hung job left behind, read into the facts the live look builds (doctor/facts/hang/), so
one model (facts/hang/shape.py) and one judge (checks/hang.py) name the rank that held the job,
whether the doctor looked at the ranks itself or reads their text afterwards.

- every rank's watchdog lines (hang/watchdog.py) become that rank's Flight Recorder status: the
  work that timed out is the collective it waits in, with its op and size, and "last enqueued /
  last completed" are its ``pg_status``; Flight Recorder's own dump files are read as they are;
- pasted stacks and process tables (hang/pasted.py) become the ranks' threads and states;
- the tools' verdicts (hang/verdicts.py): NCCL RAS's report is the RAS answer the stacks agent
  brings back; torchfrtrace's and Horovod's missing ranks are ``Told``; a rank its launcher saw
  killed or crash (torchrun's root cause, mpirun's and srun's reports) is ``exited``.

A rank's number comes from its lines (``[rank3]:``, ``[Rank 3]``), else from its file's name
(file_ranks: torchrun --log-dir, Slurm's %t, rank3.log, fr_3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from doctor.core.logline import Origin, splice_at, strip_prefixes
from doctor.explain.hang.exits import ENDS, ENTRY, NAMED, Exit, read_exits
from doctor.explain.hang.signs import DUMP_STARTS
from doctor.explain.hang.watchdog import KEYWORDS as WATCHDOG_KEYWORDS
from doctor.explain.hang.watchdog import WatchdogLine, read_watchdog
from doctor.explain.hang.words import EXITS
from doctor.explain.hang.words import VERDICTS as VERDICT_KEYWORDS
from doctor.explain.keywords import KeywordIndex
from doctor.facts.hang.stacks import JobProcess, NodeStacks, StacksFacts, Told

# A file's rank in its name: rank3.log, rank_3, rank-3, proc3, task3, worker3, fr_3,
# nccl_trace_rank_3; torchrun --log-dir's <run>/attempt_0/<local rank>/stdout.log is a local one.
NAMED_RANK = re.compile(
    r"(?:^|[^a-z])(?:rank|proc|task|worker|fr|trace)[-_.]?(\d{1,6})(?!\d)", re.IGNORECASE
)
# A launcher's label of a global rank, anywhere in a line: torch's "[rank3]:", Open MPI's
# "[1,3]<stderr>:" (not torchrun's "[default3]:", a local rank).
LABELS = re.compile(
    rb"\[rank\s?(\d{1,6})\]:|\[(?:\d{1,9},)?(\d{1,6})\]<(?:stdout|stderr|stddiag)>:"
)
LOG_DIR_RANK = re.compile(r"attempt_\d+/(\d{1,6})/(?:stdout|stderr|error)\.(?:log|json)$")
OPS = {  # ProcessGroupNCCL's OpType, as Flight Recorder names the collective
    "ALLREDUCE": "all_reduce",
    "BROADCAST": "broadcast",
    "REDUCE": "reduce",
    "ALLGATHER": "all_gather",
    "_ALLGATHER_BASE": "all_gather",
    "ALLGATHER_COALESCED": "all_gather",
    "GATHER": "gather",
    "SCATTER": "scatter",
    "REDUCE_SCATTER": "reduce_scatter",
    "_REDUCE_SCATTER_BASE": "reduce_scatter",
    "ALLTOALL_BASE": "all_to_all",
    "ALLTOALL": "all_to_all",
    "BARRIER": "barrier",
    "SEND": "send",
    "RECV": "recv",
    "COALESCED": "coalesced",
}
# The words that call for a line to be read, found in one pass over the bytes: the watchdog's
# lines are decoded alone, and a large log's tail that holds no tool's verdict is not decoded.
WORDS = KeywordIndex(k.encode() for k in (*WATCHDOG_KEYWORDS, *VERDICT_KEYWORDS, *EXITS))


# Lines that name the ranks behind: TORCH_NCCL_DESYNC_DEBUG's report, Gloo's monitoredBarrier
# (every collective's, with TORCH_DISTRIBUTED_DEBUG=DETAIL).
LAGGING = {
    "desync": ("PyTorch's desync report", "the collective the others wait in"),
    "barrier": ("Gloo's monitoredBarrier", "the barrier the others passed"),
}


def file_ranks(names: Iterable[str]) -> dict[str, int]:
    """Ranks told by file names: a name that says it (rank3.log), torchrun's log folder, or
    files whose names differ in one number only (Slurm's out_%t.log: out_0.log, out_1.log)."""
    names = list(names)
    found: dict[str, int] = {}
    for name in names:
        m = LOG_DIR_RANK.search(name.replace("\\", "/")) or NAMED_RANK.search(PurePath(name).name)
        if m:
            found[name] = int(m.group(1))
    shapes: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for name in names:
        if name in found:
            continue
        parts = re.split(r"(\d+)", PurePath(name).name)
        numbers = [i for i in range(1, len(parts), 2)]
        for i in numbers:  # one number that varies while the rest of the name stays
            shape = (str(PurePath(name).parent), *parts[:i], "#", *parts[i + 1 :])
            shapes.setdefault(shape, []).append((name, int(parts[i])))
    for members in shapes.values():
        values = [n for _, n in members]
        if len(members) > 1 and len(set(values)) == len(values):
            for name, number in members:
                found.setdefault(name, number)
    return found


@dataclass
class _Group:
    """What one rank's watchdog said of one process group."""

    name: str = ""
    seq: int | None = None
    op: str | None = None
    numel: tuple[int | None, int | None] = (None, None)
    enqueued: int | None = None
    completed: int | None = None

    def merge(self, other: _Group) -> None:
        """Another line's record of the same group (a timeout line names no group; the
        failure line after it does): its numbers where it gives them, the oldest work timed out."""
        self.name = self.name or other.name
        if other.seq is not None:
            self.seq = other.seq if self.seq is None else min(self.seq, other.seq)
        self.op = self.op or other.op
        self.numel = other.numel if other.numel != (None, None) else self.numel
        self.enqueued = other.enqueued if other.enqueued is not None else self.enqueued
        self.completed = other.completed if other.completed is not None else self.completed


@dataclass
class _Rank:
    rank: int | None
    host: str = ""
    pid: int = 0
    groups: dict[str, _Group] = field(default_factory=dict)

    def take(self, line: WatchdogLine) -> None:
        self.host = self.host or line.host or ""
        self.pid = self.pid or line.pid or 0
        named = [k for k in self.groups if k]
        key = line.group or (named[0] if len(named) == 1 else "")
        if key and "" in self.groups and not named:  # the lines before named no group
            self.groups.setdefault(key, _Group()).merge(self.groups.pop(""))
        timed_out = line.kind in ("timeout", "failure", "timeout_at", "mismatch")
        said = _Group(
            line.group_name or "",
            line.seq if timed_out else None,
            line.op,
            (line.numel_in, line.numel_out),
            line.enqueued,
            line.completed,
        )
        self.groups.setdefault(key, _Group()).merge(said)

    def flight(self, only: str | None, ops: dict[tuple[str, int], str]) -> dict[str, Any] | None:
        """Flight Recorder's dump as the watchdog's lines tell it (doctor/facts/hang/flight.py
        reads it): the status per group, and the collective that timed out."""
        status: dict[str, dict[str, int]] = {}
        entries = []
        for key, g in self.groups.items():
            if g.seq is None and g.enqueued is None and g.completed is None:
                continue  # a line that tells no number (a dump signal, the heartbeat monitor)
            name = key or (only or "")
            mine = status.setdefault(name, {})
            if g.enqueued is not None:
                mine["last_enqueued_collective"] = g.enqueued
            if g.completed is not None:
                mine["last_completed_collective"] = g.completed
            elif g.seq is not None:  # the watchdog times out the oldest work not completed
                mine["last_completed_collective"] = g.seq - 1
            if g.seq is None or (g.enqueued is not None and g.seq > g.enqueued):
                continue  # nothing timed out here, or a later line says it was never queued
            said = g.op or ops.get((name, g.seq))  # another rank's line of the same work says
            op = OPS.get((said or "").upper(), (said or "?").lower())  # "?": not said
            sizes = [[g.numel[0]]] if g.numel[0] is not None else "?"
            entries.append(
                {
                    "process_group": [name, g.name],
                    "collective_seq_id": g.seq,
                    "profiling_name": f"nccl:{op}",
                    "input_sizes": sizes,
                    "state": "started",
                    "frames": [],
                }
            )
        if not status:
            return None
        return {"pg_status": status, "entries": entries, "told_by": "the watchdog's lines"}


@dataclass
class Written:
    """The hang evidence of every file read; ``facts()`` makes the live look's facts of it."""

    ranks: dict[int | None, _Rank] = field(default_factory=dict)
    processes: list[JobProcess] = field(default_factory=list)
    flights: dict[int, dict[str, Any]] = field(default_factory=dict)
    ras: list[dict[str, str]] = field(default_factory=list)
    told: list[Told] = field(default_factory=list)
    exited: dict[int, Exit] = field(default_factory=dict)  # by rank
    sources: list[str] = field(default_factory=list)  # files that gave evidence
    shown: dict[int, str] = field(default_factory=dict)  # ranks whose output is here: node
    # PyTorch 2.2's "Received a global timeout from another rank" without numbers: the rank
    # that held the job prints it too, so a rank that printed nothing was a waiter killed first.
    notice: bool = False

    def read(
        self,
        source: str,
        data: bytes,
        rank: int | None = None,
        host: str = "",
        stacks: bool = True,
    ) -> None:
        """One file's (or paste's) bytes; ``rank`` (its file name's) and ``host`` (the node whose
        output it is, where the caller knows: doctor run) for lines that give none. ``stacks``:
        look for pasted stacks and process tables too (read line by line: a paste's, not a
        large log's tail)."""
        dump = _flight_dump(data) if data.startswith(DUMP_STARTS) else None
        if dump is not None:
            number = dump.get("rank", rank)
            if isinstance(number, int):
                self.flights.setdefault(number, dump)  # the first of a rank's dumps read
                self.sources.append(source)
            return
        found = self._evidence()
        hits = WORDS.where(data)
        if rank is not None:
            self.shown.setdefault(rank, host)
        if hits:  # labels are read where a hang is: a log without one needs no census
            for a, b in LABELS.findall(data):
                self.shown.setdefault(int(a or b), host)
        watchdog = len(WATCHDOG_KEYWORDS)
        tools = watchdog + len(VERDICT_KEYWORDS)
        self._watchdog(holding(data, (at for i, at in hits if i < watchdog)), rank, host)
        verdicts = any(watchdog <= i < tools for i, _ in hits)
        # A launcher's report: its lines and a root cause's entry after it, decoded alone.
        for ended in read_exits(holding(data, (at for i, at in hits if i >= tools), ENTRY)):
            self.exited.setdefault(ended.rank, ended)
        if stacks or verdicts:
            text = data.decode("utf-8", "replace")
            if stacks:
                self._pasted(text, source, rank, host)
            if verdicts:
                self._verdicts(text)
        if self._evidence() > found:
            self.sources.append(source)

    def _evidence(self) -> int:
        return (
            len(self.ranks)
            + len(self.processes)
            + len(self.ras)
            + len(self.told)
            + len(self.exited)
        )

    def _watchdog(self, lines: list[str], rank: int | None, host: str) -> None:
        for line in lines:
            message, origin = strip_prefixes(line)
            said = read_watchdog(message, _with_rank(origin, rank))
            at = splice_at(message) if said is None else -1
            if at >= 0:  # a second writer's line spliced in: the words after it are its own
                message, origin = strip_prefixes(message[at:])
                said = read_watchdog(message, origin)
            if said is None:
                continue
            self.notice |= said.kind == "dump" and said.enqueued is None and said.seq is None
            if said.kind in LAGGING:  # the ranks the line says are behind: the cause
                tool = LAGGING[said.kind]
                what = f"{(said.op or 'collective').lower()} #{said.seq}" if said.seq else tool[1]
                self.told.extend(Told(n, "", 0, what, tool[0]) for n in said.peers)
                continue
            # A line's own "[PG 3 (TP) Rank 2]" is the rank in its group, the global one in the
            # default group (and the one a spliced line's text belongs to); else the launcher's
            # label says the global rank.
            default = said.group in (None, "", "0") or said.group_name == "default_pg"
            number = said.rank if said.rank is not None and default else origin.rank
            number = said.rank if number is None else number
            self.ranks.setdefault(number, _Rank(number, host)).take(said)

    def _pasted(self, text: str, source: str, rank: int | None, host: str) -> None:
        # Imported here: a large log's tail is read for its watchdog lines only.
        from doctor.explain.hang.pasted import KEYWORDS, read_pasted

        if not any(k in text for k in KEYWORDS):
            return
        peeled = (strip_prefixes(x) for x in text.splitlines())
        lines = ((_with_rank(origin, rank), message) for message, origin in peeled)
        found = read_pasted(lines, source)
        # The file's rank is its one process's (a whole machine's ps table in rank3.log is not
        # every process rank 3).
        unranked = [p for p in found if p.rank is None and p.role == "rank"]
        for process in found:
            if rank is not None and unranked == [process]:
                process = replace(process, env={**process.env, "RANK": str(rank)})
            if host and not process.node:
                process = replace(process, node=host)
            self.processes.append(process)

    def _verdicts(self, text: str) -> None:
        # Imported here: most hangs' text holds no tool's verdict.
        from doctor.explain.hang.verdicts import find_ras, read_frtrace, read_horovod

        lines = text.splitlines()  # as printed: the readers unwrap what they need themselves
        self.ras.extend(answer for _, answer in find_ras(lines))
        for absent in [*read_frtrace(lines), *read_horovod(lines)]:
            for number in absent.ranks:
                host = absent.hosts.get(number, "")
                pid = absent.pids.get(number, 0)
                self.told.append(Told(number, host, pid, absent.collective, absent.tool))

    def facts(self, pids: dict[int, str] | None = None) -> StacksFacts | None:
        """The live look's facts of what was read, or None where nothing told of a hang.
        ``pids``: the host each pid ran on, where the logs' other lines say (NCCL's prefix
        ``host:pid:tid``), for ranks whose own evidence names no node."""
        # A launcher's word on a killed rank alone is a failed job, not a hang.
        if not (self.ranks or self.processes or self.flights or self.ras or self.told):
            return None
        named = {k for r in self.ranks.values() for k in r.groups if k}
        only = next(iter(named)) if len(named) == 1 else None
        ops = {
            (key or (only or ""), g.seq): g.op
            for r in self.ranks.values()
            for key, g in r.groups.items()
            if g.op and g.seq is not None
        }
        # One rank killed or crashed is the cause; several (a time limit, scancel, a whole node
        # lost, srun's 'tasks 0-63: Killed') say nothing of which rank held the others.
        ended = list(self.exited.values()) if len(self.exited) == 1 else []
        by_rank: dict[int | None, JobProcess] = {}
        loose: list[JobProcess] = []
        for number, said in self.ranks.items():
            env = {"RANK": str(number)} if number is not None else {}
            flight = self.flights.get(number) if number is not None else None
            by_rank[number] = JobProcess(
                node=said.host,
                pid=said.pid,
                role="rank",
                argv=(),
                env=env,
                flight=flight or said.flight(only, ops),
            )
        for number, dump in self.flights.items():
            if number not in by_rank:
                by_rank[number] = JobProcess("", 0, "rank", (), {"RANK": str(number)}, flight=dump)
        for process in self.processes:
            if process.rank is None or process.role != "rank":  # a worker carries its rank's env
                loose.append(process)
                continue
            known = by_rank.get(process.rank)
            by_rank[process.rank] = process if known is None else _merged(known, process)
        crashed = [p for p in loose if p.crash and p.role == "rank"]
        if len(ended) == 1 and len(crashed) == 1 and _same_end(ended[0], crashed[0], by_rank):
            # faulthandler's dump of the one crash the launcher saw, written as it died.
            (end,), (process,) = ended, crashed
            loose.remove(process)
            env = {**process.env, "RANK": str(end.rank)}
            by_rank[end.rank] = replace(process, node=process.node or end.node, env=env)
        # A process the text gives neither a rank nor a pid (faulthandler's dumps) is still one
        # process of its own: a number below zero keeps it apart, and is never shown.
        loose = [
            p if p.pid or p.rank is not None else replace(p, pid=-i) for i, p in enumerate(loose, 1)
        ]
        nodes: dict[str, list[JobProcess]] = {}
        for process in [*by_rank.values(), *loose]:
            if not process.node and process.pid and (pids or {}).get(process.pid):
                process = replace(process, node=(pids or {})[process.pid])
            nodes.setdefault(process.node, []).append(process)
        answer = {node: NodeStacks(node, processes=tuple(found)) for node, found in nodes.items()}
        if self.ras:
            first = next(iter(answer), "")
            held = answer.get(first, NodeStacks(first))
            answer[first] = NodeStacks(held.node, processes=held.processes, ras=self.ras[0])
        quiet = () if self.notice else tuple(sorted(self._quiet(by_rank)))
        exited = tuple((e.rank, e.node, e.describe()) for e in ended)
        return StacksFacts(answer, live=False, told=tuple(self.told), quiet=quiet, exited=exited)

    def _quiet(self, by_rank: dict[int | None, JobProcess]) -> Iterable[tuple[int, str]]:
        """Ranks whose output is here that gave no evidence, with their node where known."""
        told = {t.rank for t in self.told}
        for number, host in self.shown.items():
            if number not in by_rank and number not in told:
                yield number, host


def holding(data: bytes, offsets: Iterable[int], after: int = 0) -> list[str]:
    """The lines of ``data`` that hold the bytes at ``offsets`` and the ``after`` lines that
    follow each, once each, in order, decoded."""
    starts: set[int] = set()
    for at in offsets:
        start = data.rfind(b"\n", 0, at) + 1
        for _ in range(after + 1):
            if start >= len(data) or start in starts:
                break
            starts.add(start)
            start = data.find(b"\n", start) + 1 or len(data)
    lines = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        line = data[start : end if end >= 0 else len(data)].rstrip(b"\r")
        lines.append(line.decode("utf-8", "replace"))
    return lines


def _flight_dump(data: bytes) -> dict[str, Any] | None:
    from doctor.explain.hang.verdicts import read_flight_dump  # a dump file's reader: only here

    return read_flight_dump(data)


def _same_end(end: Exit, process: JobProcess, by_rank: dict[int | None, JobProcess]) -> bool:
    """The launcher's crashed rank and an unranked faulthandler dump of the same signal, where
    that rank has no evidence of its own yet."""
    return end.rank not in by_rank and ENDS.get(NAMED.get(process.crash, 0)) == end.signal


def _with_rank(origin: Origin, rank: int | None) -> Origin:
    return origin if origin.rank is not None or rank is None else origin._replace(rank=rank)


def _merged(told: JobProcess, shown: JobProcess) -> JobProcess:
    """One rank seen twice (its watchdog lines and its pasted stack): the stack and state from
    the paste, the node and pid from whichever says, Flight Recorder's status from the text."""
    return replace(
        shown,
        node=shown.node or told.node,
        pid=shown.pid or told.pid,
        role="rank",
        env={**told.env, **shown.env},
        flight=shown.flight or told.flight,
    )
