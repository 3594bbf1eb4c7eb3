"""Which pairs a cross-node stage tests: all of them on small clusters, a fixed fan-in sample on
large ones, so the stage's cost grows with N·k instead of N².

The sample is a ring both ways (every node tested as a source and a target by its neighbours, so
a dead or cut-off node is always seen) plus ``k`` random peers per node drawn as ``k`` random
permutations: every node is then a target exactly ``2 + k`` times, so no sshd or listener gets
more than ``2 + k`` connections at once from the stage, whatever the draw. The draw is seeded,
and the seed and the pairs are reported, so ``--seed`` tests the same pairs again.
"""

from __future__ import annotations

import enum
import random

from doctor.facts.coverage import Coverage

RANDOM_PEERS = 3
# Swaps tried per node to repair a round's permutation before the round is given up (possible
# only on very small clusters, where the ring already covers almost every pair).
REPAIRS = 50


class Sampling(str, enum.Enum):
    auto = "auto"  # all pairs up to the stage's threshold, sampled beyond
    full = "full"
    sampled = "sampled"
    off = "off"


def choose(
    nodes: list[str], mode: Sampling, all_pairs_up_to: int, seed: int, k: int = RANDOM_PEERS
) -> Coverage:
    """The pairs to test among ``nodes`` (inventory order) in ``mode`` (not off)."""
    sampled = mode is Sampling.sampled or (mode is Sampling.auto and len(nodes) > all_pairs_up_to)
    if not sampled:
        return Coverage("full", None, {n: tuple(p for p in nodes if p != n) for n in nodes})
    return Coverage("sampled", seed, _sample(nodes, seed, k))


def _sample(nodes: list[str], seed: int, k: int) -> dict[str, tuple[str, ...]]:
    n = len(nodes)
    chosen: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for j in ((i + 1) % n, (i - 1) % n):
            if j != i and j not in chosen[i]:
                chosen[i].append(j)
    rng = random.Random(seed)
    for _round in range(k):
        perm = _permutation(n, chosen, rng)
        if perm is not None:
            for i in range(n):
                chosen[i].append(perm[i])
    return {nodes[i]: tuple(nodes[j] for j in sorted(chosen[i])) for i in range(n)}


def _permutation(n: int, chosen: list[list[int]], rng: random.Random) -> list[int] | None:
    """A random permutation giving every node a new peer (never itself, never one it has):
    a shuffle, then random swaps that fix both ends until no node is left in conflict."""

    def bad(i: int, target: int) -> bool:
        return target == i or target in chosen[i]

    perm = list(range(n))
    rng.shuffle(perm)
    for _try in range(REPAIRS * n):
        conflicts = [i for i in range(n) if bad(i, perm[i])]
        if not conflicts:
            return perm
        i, j = rng.choice(conflicts), rng.randrange(n)
        if not bad(i, perm[j]) and not bad(j, perm[i]):
            perm[i], perm[j] = perm[j], perm[i]
    return None
