"""One signature's sighting in the logs: where it was first seen, how often, what its lines named.
Its own module so that what reads hits (explanation.py, culprit.py) imports it without importing
each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.core.logline import Origin
from doctor.explain.catalogue import Signature

MAX_EVIDENCE = 3
MAX_EVIDENCE_CHARS = 300


@dataclass
class Hit:
    """Where a signature was first seen, and how often after."""

    signature: Signature
    groups: dict[str, str]
    origin: Origin
    source: str  # file name
    line_no: int
    order: int  # global arrival order, across files
    count: int = 0
    evidence: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, text)
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    # What its lines' culprit groups name (culprit.named), by how many distinct lines named it,
    # in the order first named: ("node", "nid007306"), ("rank", "640"), ("peer", "10.1.2.3<5").
    named: dict[tuple[str, str], int] = field(default_factory=dict)
    awaits_stamp: bool = False  # first seen before any timestamp of its (file, rank)
    # First seen on its file's first line, which no prefix started: maybe the tail of a line
    # an excerpt cut (findings() judges it against how the file's other lines start).
    on_first_line: bool = False

    def add_evidence(self, source: str, line_no: int, said: str) -> None:
        """Keep the first few distinct lines (a line repeated by every rank is kept once)."""
        if len(self.evidence) < MAX_EVIDENCE and all(
            not e.endswith(said) for _, _, e in self.evidence
        ):
            self.evidence.append((source, line_no, said))
