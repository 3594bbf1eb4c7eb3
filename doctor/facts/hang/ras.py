"""NCCL's RAS (NCCL >= 2.24): every rank's collective counts, the ranks it lost, their errors.

The stacks agent asks RAS on a node (NCCL's client protocol, src/ras/client.cc) for its
``STATUS``: JSON where NCCL offers ``SET FORMAT json``, its text report otherwise. Both say the
same: per communicator, how many of each collective every rank has launched, which ranks sent no
data (their process is gone, or their node), and the errors ranks reported. RAS sees no hang in
which every rank is stuck in the same collective: their counts agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RasRank:
    rank: int
    host: str  # the address RAS knows the rank's node by
    pid: int | None


@dataclass(frozen=True)
class RasLag:
    rank: RasRank
    op: str  # AllReduce, Broadcast, ...
    count: int
    most: int  # the highest count of that op among the communicator's ranks


@dataclass(frozen=True)
class RasView:
    version: str
    lags: list[RasLag] = field(default_factory=list)
    missing: list[RasRank] = field(default_factory=list)
    errors: list[tuple[RasRank, str]] = field(default_factory=list)


TEXT_HEAD = re.compile(r"different (\w+) operation counts")
# Ranks that share a value are counted on one line ("3 ranks have launched up to operation 5",
# "2 ranks reported Remote process error"), then listed "Rank N -- GPU ..." (the outliers, or
# all in VERBOSE STATUS); a rank alone says its value on its own line. The GPU is "0", "0,1" or
# "0 (NVML 3)"; RAS may know no process for a rank (src/ras/client_support.cc, NCCL 2.24-2.29).
TEXT_GROUP = re.compile(
    r"^\s*\d+ ranks (?:have launched up to operation (?P<count>\d+)|have not launched any "
    r"operations(?P<none>)|reported (?P<error>.+?)|have status (?P<status>\w+))\s*$"
)
TEXT_RANK = re.compile(
    r"^\s*Rank (?P<rank>\d+) (?:has launched up to operation (?P<count>\d+) |has not launched any "
    r"operations (?P<none>)|reported (?P<error>.+?) |has status (?P<status>\w+) )?-- "
    r"(?:GPU .*? managed by process (?P<pid>\d+) on node (?P<host>\S+)|\[process information)"
)
TEXT_ERRORS = re.compile(r"\s*(?:Initialization|Asynchronous) errors? on")
TEXT_MISSING_LIST = re.compile(r"^\s*The missing ranks?: ([\d,]+)")  # NCCL 2.24
# ncclResult_t, as RAS's JSON gives a rank's asynchronous error.
NCCL_RESULTS = {
    1: "unhandled CUDA error", 2: "system error", 3: "internal error", 4: "invalid argument",
    5: "invalid usage", 6: "remote process error", 7: "in progress",
}  # fmt: skip
VERSION = re.compile(r"NCCL version (\S+)")
# NCCL 2.28.9 writes a missing rank's "nvml_dev" with no comma before its "status" (seen on an
# H200): a value at the end of a line followed by a key on the next one gets its comma back.
MISSING_COMMA = re.compile(r'([0-9"el}\]])(\s*\n\s*")')


def read_ras(answer: dict[str, Any] | None) -> RasView | None:
    """RAS's answer as the agent brought it back ({format, body}); None when there is none."""
    if not answer or "body" not in answer:
        return None
    body = str(answer["body"])
    if answer.get("format") == "json":
        for text in (body, MISSING_COMMA.sub(r"\1,\2", body)):
            try:
                return _from_json(json.loads(text))
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
    return _from_text(body)


def _from_json(doc: dict[str, Any]) -> RasView:
    view = RasView(str(doc.get("nccl_version", "")))
    for comm in doc.get("communicators") or []:
        ranks = comm.get("ranks") or []
        counts: dict[str, dict[int, int]] = {}
        members = {}
        for r in ranks:
            who = RasRank(int(r["rank"]), str(r.get("host", "?")), r.get("pid"))
            members[who.rank] = who
            for op, n in (r.get("collective_counts") or {}).items():
                counts.setdefault(op, {})[who.rank] = int(n)
            status = r.get("status") or {}
            if status.get("async_error"):
                view.errors.append((who, NCCL_RESULTS.get(status["async_error"], "an error")))
            if status.get("abort_flag"):
                view.errors.append((who, "communicator aborted"))
        for op, by_rank in counts.items():
            most = max(by_rank.values())
            view.lags.extend(
                RasLag(members[r], op, n, most) for r, n in sorted(by_rank.items()) if n < most
            )
        for m in comm.get("missing_ranks") or []:
            view.missing.append(
                RasRank(int(m.get("rank", -1)), str(m.get("host", "?")), m.get("pid"))
            )
    return view


def _from_text(body: str) -> RasView:
    found = VERSION.search(body)
    view = RasView(found.group(1) if found else "")
    counts = _Counts()
    section = ""  # missing, counts, status, errors: how a "Rank N -- GPU ..." line is read
    group: re.Match[str] | None = None  # "N ranks ...": what the Rank lines after it share
    for line in body.splitlines():
        if line and not line.startswith(" "):  # a heading: Errors, #0-0 (...) MISMATCH, ...
            counts.close(view)
            section, group = "", None
        elif head := TEXT_HEAD.search(line):
            counts.close(view)
            counts, section, group = _Counts(head.group(1)), "counts", None
        elif "Missing communicator data" in line or "different status" in line:
            counts.close(view)
            section, group = ("missing" if "Missing" in line else "status"), None
        elif TEXT_ERRORS.match(line):
            section, group = "errors", None
        elif m := TEXT_GROUP.match(line):
            group = m
            if m["count"] is not None or m["none"] is not None:
                counts.top = max(counts.top, int(m["count"] or 0))
        elif m := TEXT_MISSING_LIST.match(line):
            for rank in m.group(1).split(","):
                if rank.isdigit() and all(w.rank != int(rank) for w in view.missing):
                    view.missing.append(RasRank(int(rank), "?", None))
        elif m := TEXT_RANK.match(line):
            _take(view, counts, section, m, group)
    counts.close(view)
    return view


def _take(
    view: RasView, counts: _Counts, section: str, m: re.Match[str], group: re.Match[str] | None
) -> None:
    """One "Rank N ..." line: its own value, or else its group's, read as its section says."""
    who = RasRank(int(m["rank"]), m["host"] or "?", int(m["pid"]) if m["pid"] else None)
    said = m if m["count"] or m["none"] is not None or m["error"] or m["status"] else group
    if section == "missing" and said is None:
        if who not in view.missing:
            view.missing.append(who)
    elif said is None:
        return
    elif said["count"] is not None or said["none"] is not None:
        counts.take(who, int(said["count"] or 0))
    elif said["error"]:
        view.errors.append((who, said["error"]))
    elif said["status"] == "ABORT":
        view.errors.append((who, "communicator aborted"))


@dataclass
class _Counts:
    """One operation's counts in a MISMATCH block; ``top`` holds the highest count said, also
    by a group whose ranks are not listed (the many that agree)."""

    op: str = ""
    by_rank: dict[int, tuple[RasRank, int]] = field(default_factory=dict)
    top: int = 0

    def take(self, who: RasRank, count: int) -> None:
        self.by_rank[who.rank] = (who, count)
        self.top = max(self.top, count)

    def close(self, view: RasView) -> None:
        if self.op and self.by_rank:
            view.lags.extend(
                RasLag(who, self.op, n, self.top)
                for who, n in self.by_rank.values()
                if n < self.top
            )
        self.op, self.by_rank = "", {}
