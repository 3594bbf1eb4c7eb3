"""What group testing ran and found: allreduces on groups of nodes, round by round, and the
nodes (or the pair of nodes) they pinned. Facts only: doctor/stages/allreduce/search.py decides
what to test, checks/allreduce.py judges what was found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What one group's allreduce came to: it passed; it failed or hung; it passed far slower than
# the other groups of its size in its round; it proved nothing (its ranks were still starting).
OUTCOMES = ("pass", "fail", "slow", "unknown")
# Why a group was tested: a part of a group that failed; a suspect with a node known good; two
# parts that each passed alone, together; known-good nodes that say how fast a group runs now.
ROLES = ("split", "confirm", "cross", "control")


@dataclass(frozen=True)
class GroupTest:
    round: int
    nodes: tuple[str, ...]  # as run: the first is the group's rendezvous
    role: str
    outcome: str
    seconds: float = 0.0
    busbw_gbps: float | None = None
    # Slow searches: the healthy groups' speed in its round (their median, among the groups of
    # about its size or larger), what it was held to.
    reference_gbps: float | None = None
    headline: str = ""
    partner: str | None = None  # a confirmation: the node known good it ran with

    @property
    def positive(self) -> bool:
        return self.outcome in ("fail", "slow")

    def line(self) -> str:
        """One line of evidence: round, group, outcome and speed."""
        who = ",".join(self.nodes)
        if self.partner:
            who += f" ({self.partner} known good)"
        text = f"round {self.round}, {self.role} {who}: {self.outcome}"
        if self.busbw_gbps is not None:
            text += f", busbw {self.busbw_gbps * 8e3:.1f} Mbit/s"
            if self.reference_gbps is not None:
                text += f" (healthy groups {self.reference_gbps * 8e3:.1f} Mbit/s)"
        if self.outcome == "fail" and self.headline:
            text += f": {self.headline}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "nodes": list(self.nodes),
            "role": self.role,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 3),
            "busbw_gbps": self.busbw_gbps,
            "reference_gbps": self.reference_gbps,
            "partner": self.partner,
            "headline": self.headline,
        }


@dataclass(frozen=True)
class GroupSearch:
    """The search's outcome. ``mode`` says what made the allreduce across every node a positive:
    ``fail`` (it failed or hung) or ``slow`` (some of its links ran far below the others)."""

    mode: str
    nodes: int  # how many nodes it searched
    tests: tuple[GroupTest, ...] = ()
    rounds: int = 0
    seconds: float = 0.0
    bad_nodes: tuple[str, ...] = ()  # each positive with a node known good
    bad_pairs: tuple[tuple[str, str], ...] = ()  # positive together, each negative with others
    suspects: tuple[str, ...] = ()  # in a positive group the search could not resolve
    unresolved: str = ""  # why it stopped short of naming every cause ("" when it did not)
    interrupted: bool = False  # Ctrl-C ended it

    @property
    def named(self) -> tuple[str, ...]:
        pairs = (n for pair in self.bad_pairs for n in pair)
        return tuple(dict.fromkeys((*self.bad_nodes, *pairs)))

    def involving(self, *nodes: str) -> list[GroupTest]:
        """The tests that ran every one of ``nodes``."""
        return [t for t in self.tests if all(n in t.nodes for n in nodes)]

    def summary(self) -> str:
        s = "" if self.rounds == 1 else "s"
        return (
            f"group testing of {self.nodes} nodes: {self.rounds} round{s}, "
            f"{len(self.tests)} tests, {self.seconds:.1f}s"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "nodes": self.nodes,
            "rounds": self.rounds,
            "tests": len(self.tests),
            "seconds": round(self.seconds, 3),
            "bad_nodes": list(self.bad_nodes),
            "bad_pairs": [list(p) for p in self.bad_pairs],
            "suspects": list(self.suspects),
            "unresolved": self.unresolved or None,
            "interrupted": self.interrupted,
            "groups": [t.to_json() for t in self.tests],
        }


def stopped(search: GroupSearch | None) -> bool:
    """Whether Ctrl-C ended a search (its report is written, then the run exits 130)."""
    return search is not None and search.interrupted
