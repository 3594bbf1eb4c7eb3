"""Which ordered pairs of nodes a cross-node stage tested: all of them, or a seeded sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Coverage:
    """What a stage tested, out of every ordered pair of nodes."""

    mode: str  # "full" or "sampled"
    seed: int | None  # None when every pair was tested
    peers: dict[str, tuple[str, ...]]  # source -> the targets it tests

    @property
    def pairs(self) -> int:
        return sum(len(t) for t in self.peers.values())

    @property
    def total(self) -> int:
        n = len(self.peers)
        return n * (n - 1)

    def tests(self, source: str, target: str) -> bool:
        return target in self.peers.get(source, ())

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "mode": self.mode,
            "seed": self.seed,
            "pairs_tested": self.pairs,
            "pairs_total": self.total,
        }
        if self.mode == "sampled":
            doc["pairs"] = [[s, t] for s, targets in self.peers.items() for t in targets]
        return doc
