"""Choose the sieve's anchors (doctor/explain/sieve.py) for the shipped keywords, and write them
into signatures.json: ``python -m tests.explain.anchors`` after the catalogue's keywords or NCCL's
reader's change (tests/explain/test_sieve.py says when).

Anchors are substrings of the keywords such that every keyword holds one: few enough for the
automaton's SIMD search (at most 64 patterns), long and unusual enough that ordinary log text
rarely holds one. A greedy cover: the substring (6 to 8 bytes, or a whole shorter keyword) that
the most uncovered keywords hold, preferring one that neither starts nor ends with a space (the
automaton's SIMD search keys on a pattern's first bytes, and a space is text's commonest byte:
such anchors cost 20% of its speed on text made of words), then fewer of English text's
commonest letters and spaces, then longer; "CCL " is taken first, which every NCCL and RCCL
logger line holds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from importlib.resources import files

from doctor.explain.catalogue import catalogue
from doctor.explain.nccl_lines import KEYWORDS as NCCL_KEYWORDS

SEED = (b"CCL ",)
SHORTEST, LONGEST = 6, 8
COMMON = frozenset(b" etaoinshrdlucmfwypvbgk")
SIMD_LIMIT = 64  # aho-corasick's Teddy search takes at most this many patterns


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


def main() -> None:
    path = files("doctor.explain").joinpath("signatures.json")
    document = json.loads(path.read_text())
    document["anchors"] = [a.decode() for a in choose(keywords())]
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")  # type: ignore[attr-defined]
    print(f"{len(document['anchors'])} anchors")


if __name__ == "__main__":
    main()
