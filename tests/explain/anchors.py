"""Choose the sieve's anchors (doctor/explain/sieve.py) for the shipped keywords, and write them
into signatures.json: ``python -m tests.explain.anchors`` after the catalogue's keywords or NCCL's
reader's change (tests/explain/test_sieve.py says when).

Anchors are substrings of the keywords such that every keyword holds one: few enough for the
automaton's SIMD search (at most 64 patterns), long and unusual enough that ordinary log text
rarely holds one. A greedy cover: the substring (6 to 8 bytes, or a whole shorter keyword) that
the most uncovered keywords hold, preferring one that neither starts nor ends with a space (the
automaton's SIMD search keys on a pattern's first bytes, and a space is text's commonest byte:
such anchors cost 20% of its speed on text made of words), then fewer of English text's
commonest letters and spaces, then longer. Taken first: "CCL ", which every NCCL and RCCL logger
line holds, and the words of an error in its common spellings ("rror", "ERROR", "FAIL", "ailed",
"atal", "xcept"), which the long tail's readers and the unrecognised lines' keywords hold: each
covers many keywords at once, where a piece of every reader's own words would take the sieve
past its 64.

Then their order, which decides how fast the search runs. The automaton's SIMD search (Teddy, in
the aho-corasick crate: src/packed/teddy/builder.rs and generic.rs) puts more than 32 patterns in
16 buckets by their place in the list, the i-th in bucket 15 - i % 16 (a pattern whose first four
bytes have the low nibbles of an earlier one's goes to that one's bucket), and takes a position of
the text as a candidate for a bucket where each of the next four bytes has, at its place, a low
nibble and a high nibble that patterns of the bucket have there. Every candidate that is no match
costs a verification; ordered as chosen, the anchors made about ten times as many as ordered to
make few, and the search of a 200 MB log took a quarter longer. So the order is searched: swaps
of two anchors, kept when the candidates over the project's own log corpus (tests/fixtures/logs)
are no more, from a fixed seed.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from importlib.resources import files

from doctor.explain.catalogue import catalogue
from doctor.facts.nccl.lines import KEYWORDS as NCCL_KEYWORDS
from tests.explain.fixtures import LOGS, body

SEED = (b"CCL ", b"rror", b"ERROR", b"FAIL", b"ailed", b"atal", b"xcept")
SHORTEST, LONGEST = 6, 8
COMMON = frozenset(b" etaoinshrdlucmfwypvbgk")
SIMD_LIMIT = 64  # aho-corasick's Teddy search takes at most this many patterns
MASK = 4  # bytes of a pattern's start that Teddy's candidates are made of (all anchors have 4)
SWAPS = 6000  # tried in the search for an order: past some 5000 it finds no fewer candidates


def keywords() -> list[bytes]:
    found = [kw for sig in catalogue() for kw in sig.keywords] + list(NCCL_KEYWORDS)
    return list(dict.fromkeys(kw.encode() for kw in found))


def _pieces(keyword: bytes) -> set[bytes]:
    lengths = range(min(SHORTEST, len(keyword)), min(LONGEST, len(keyword)) + 1)
    return {keyword[i : i + n] for n in lengths for i in range(len(keyword) - n + 1)}


def choose(words: Iterable[bytes]) -> list[bytes]:
    chosen = list(SEED)
    left = {w for w in words if not any(a in w for a in chosen)}
    pieces = {w: _pieces(w) for w in left}
    while left:
        counts = Counter(p for w in left for p in pieces[w])
        best = max(
            counts,
            key=lambda p: (
                counts[p],
                p[:1] != b" " and p[-1:] != b" ",
                -sum(c in COMMON for c in p) / len(p),
                len(p),
                p,
            ),
        )
        chosen.append(best)
        left = {w for w in left if best not in w}
    return chosen


class Candidates:
    """How many candidates Teddy makes over a text, for patterns in a given order: counted over
    the text's distinct 4-byte sequences, each a bit of a big integer per nibble and place."""

    def __init__(self, text: bytes) -> None:
        grams = Counter(text[i : i + MASK] for i in range(len(text) - MASK + 1))
        nibbles: list[list[list[int]]] = [[[0] * 16 for _ in range(MASK)] for _ in range(2)]
        by_count: dict[int, int] = {}
        for bit, (gram, times) in enumerate(grams.items()):
            for place, byte in enumerate(gram):
                nibbles[0][place][byte & 15] |= 1 << bit
                nibbles[1][place][byte >> 4] |= 1 << bit
            by_count[times] = by_count.get(times, 0) | 1 << bit
        self._low, self._high = nibbles
        self._by_count = list(by_count.items())
        self._cost: dict[frozenset[bytes], int] = {}

    def bucket(self, patterns: frozenset[bytes]) -> int:
        """The candidates of one bucket: positions where every place takes a nibble pair the
        bucket's patterns have there."""
        known = self._cost.get(patterns)
        if known is None:
            taken = -1
            for place in range(MASK):
                low = high = 0
                for nibble in {p[place] & 15 for p in patterns}:
                    low |= self._low[place][nibble]
                for nibble in {p[place] >> 4 for p in patterns}:
                    high |= self._high[place][nibble]
                taken &= low & high
            known = sum(times * (taken & grams).bit_count() for times, grams in self._by_count)
            self._cost[patterns] = known
        return known

    def __call__(self, order: Sequence[bytes]) -> int:
        count = 16 if len(order) > 32 else 8
        buckets: list[set[bytes]] = [set() for _ in range(count)]
        by_low: dict[bytes, int] = {}
        for i, pattern in enumerate(order):
            low = bytes(b & 15 for b in pattern[:MASK])
            buckets[by_low.setdefault(low, count - 1 - i % count)].add(pattern)
        return sum(self.bucket(frozenset(b)) for b in buckets if b)


def corpus() -> bytes:
    """The project's own logs: the text the order is chosen on."""
    return b"\n".join(body(p) for p in sorted(LOGS.glob("*/*.log")))


def ordered(anchors: list[bytes], candidates: Candidates, seed: int = 0) -> list[bytes]:
    """``anchors`` in an order that makes few candidates: swaps kept where they make no more."""
    order, cost = list(anchors), candidates(anchors)
    pick = random.Random(seed)
    for _ in range(SWAPS):
        i, j = pick.sample(range(len(order)), 2)
        tried = list(order)
        tried[i], tried[j] = tried[j], tried[i]
        if (after := candidates(tried)) <= cost:
            order, cost = tried, after
    return order


def main() -> None:
    path = files("doctor.explain").joinpath("signatures.json")
    document = json.loads(path.read_text())
    document["anchors"] = [a.decode() for a in ordered(choose(keywords()), Candidates(corpus()))]
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")  # type: ignore[attr-defined]
    print(f"{len(document['anchors'])} anchors")


if __name__ == "__main__":
    main()
