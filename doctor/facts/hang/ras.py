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


TEXT_COUNT = re.compile(
    r"Rank (\d+) has (?:launched up to operation (\d+)|not launched any operations)"
    r".*?process (\d+) on node (\S+)"
)
TEXT_HEAD = re.compile(r"different (\w+) operation counts")
TEXT_MISSING = re.compile(r"^\s*Rank (\d+) -- GPU \d+ managed by process (\d+) on node (\S+)")
TEXT_ERROR = re.compile(
    r"Rank (\d+) reported (.+?) -- GPU \d+ managed by process (\d+) on node (\S+)"
)
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
    op, counts, block = "", {}, ""  # type: tuple[str, dict[int, tuple[RasRank, int]], str]
    for line in body.splitlines():
        if head := TEXT_HEAD.search(line):
            _close(view, op, counts)
            op, counts = head.group(1), {}
            continue
        if line.strip().startswith(("Missing communicator data", "INCOMPLETE")):
            block = "missing"
        elif line and not line.startswith(" "):
            block = ""
        if m := TEXT_COUNT.search(line):
            who = RasRank(int(m.group(1)), m.group(4), int(m.group(3)))
            counts[who.rank] = (who, int(m.group(2) or 0))
        elif (m := TEXT_ERROR.search(line)) is not None:
            who = RasRank(int(m.group(1)), m.group(4), int(m.group(3)))
            view.errors.append((who, m.group(2)))
        elif block == "missing" and (m := TEXT_MISSING.match(line)):
            who = RasRank(int(m.group(1)), m.group(3), int(m.group(2)))
            if who not in view.missing:
                view.missing.append(who)
    _close(view, op, counts)
    return view


def _close(view: RasView, op: str, counts: dict[int, tuple[RasRank, int]]) -> None:
    if not op or not counts:
        return
    most = max(n for _, n in counts.values())
    view.lags.extend(RasLag(who, op, n, most) for who, n in counts.values() if n < most)
