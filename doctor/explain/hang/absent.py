"""A hang tool's verdict that some ranks never joined a collective, and what its readers share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_RANK = 1 << 24  # more ranks than any job has: a larger number is not a rank
MAX_VERDICTS = 1000  # verdicts kept from one text
SHOWN = 3  # names a verdict shows before "and N more"


@dataclass(frozen=True)
class Absent:
    """A tool's verdict: these ranks did not join this collective (the others wait in it)."""

    ranks: tuple[int, ...]  # the ranks the tool names as missing / behind
    # e.g. "all_reduce #5 of process group 0 (default_pg)"; Horovod: the tensor names (a few,
    # then "and N more")
    collective: str
    tool: str  # "torchfrtrace", "Horovod's stall inspector", "NCCL RAS"
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host where the text says
    pids: dict[int, int] = field(default_factory=dict)  # rank -> pid where the text says
    expected: int | None = None  # how many ranks should have joined, where said
    line_no: int = 0  # where in the source it was said (1-based, of the lines given)
    # The tool's own words for what it saw, where it says more than "missing": "Culprit rank 1;
    # Error type: COLLECTIVE_TYPE_MISMATCH, ...", "stalled past the shutdown time", ...
    detail: str = ""


RANK_LIST = re.compile(r"\d+")


def ranks_in(text: str) -> tuple[int, ...]:
    """The ranks a printed set or list names ("{1, 3}", "1, 3", "[2]"), sorted, once each."""
    found = {int(n) for n in RANK_LIST.findall(text[:20000]) if len(n) < 9}
    return tuple(sorted(r for r in found if r < MAX_RANK))


def names(items: list[str], more: bool = False) -> str:
    """A few names, then how many more: "a, b, c and 4 more"; ``more``: the tool cut its list."""
    shown = ", ".join(items[:SHOWN])
    rest = len(items) - SHOWN
    if rest > 0:
        return f"{shown} and {rest} more" + (" (and others not listed)" if more else "")
    return f"{shown} and more" if more else shown


def kept(found: list[Absent]) -> list[Absent]:
    """Each verdict once (a tool repeats one per entry it reads), at most MAX_VERDICTS."""
    seen: set[tuple[tuple[int, ...], str, str]] = set()
    out = []
    for a in found:
        key = (a.ranks, a.collective, a.detail)
        if a.ranks and key not in seen:
            seen.add(key)
            out.append(a)
    return out[:MAX_VERDICTS]
