"""The first pass over a log, at the speed of its bytes: which lines may matter, and which of
them were read already.

Most of a log is lines no verdict needs (progress, metrics, checkpoints), and NCCL-dense text is
the same lines many times over. Two things keep them out of Python:

- One Aho-Corasick pass (ahocorasick_rs, Rust) over each block, for *anchors*: a few dozen
  substrings such that every keyword the catalogue and NCCL's reader look for holds one
  (signatures.json "anchors"). Up to 64 patterns, leftmost-first, the automaton searches with SIMD
  (Teddy): 2 GB/s here, where the full keyword set (over 140, past the SIMD search's limit) runs
  at 0.6 GB/s. It releases the GIL, so worker threads search the next blocks while Python reads
  this one's matches (``Ahead``).
- A line already read is not read again: ``Seen`` keeps what reading it did that must happen
  again (the hit it counted, the NCCL version it tallied), and the scanner replays that.

Only a new line holding an anchor goes on to the keyword index and the readers.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import Generic, TypeVar

import ahocorasick_rs

MAX_SEEN = 1 << 18  # lines remembered (a few tens of MB of bytes at most: lines are cut)
R = TypeVar("R")
B = TypeVar("B", bytes, memoryview)


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@cache
def _automaton(anchors: tuple[bytes, ...]) -> ahocorasick_rs.BytesAhoCorasick:
    return ahocorasick_rs.BytesAhoCorasick(
        anchors, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
    )


class Sieve:
    """Where a block holds an anchor; every keyword holds one of ``anchors``, and a keyword no
    stored anchor covers (a catalogue edited without them) is its own."""

    def __init__(self, keywords: Iterable[bytes], anchors: Iterable[bytes]) -> None:
        stored = tuple(anchors)
        extra = [k for k in keywords if not any(a in k for a in stored)]
        self.anchors = stored + tuple(dict.fromkeys(extra))
        self._find = _automaton(self.anchors).find_matches_as_indexes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sieve) and other.anchors == self.anchors

    def __hash__(self) -> int:
        return hash(self.anchors)

    def find(self, block: bytes | memoryview) -> list[tuple[int, int, int]]:
        """(anchor, start, end) of each anchor in ``block``, left to right, not overlapping."""
        return self._find(block)


class Ahead(Generic[B]):
    """Blocks searched by ``workers`` threads ahead of the one being read, in order (at most
    ``workers`` + 1 blocks and their matches held at once). The first searches start when this
    is made: made early, they run while the reader is still being built."""

    def __init__(self, blocks: Iterable[B], sieve: Sieve, workers: int) -> None:
        self.sieve = sieve
        self._blocks: Iterator[B] = iter(blocks)
        self._workers = workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sieve")
        self._ahead: deque[tuple[B, Future[list[tuple[int, int, int]]]]] = deque()
        self._fill()

    def _fill(self) -> None:
        while len(self._ahead) <= self._workers:
            block = next(self._blocks, None)
            if block is None:
                return
            self._ahead.append((block, self._pool.submit(self.sieve.find, block)))

    def __iter__(self) -> Iterator[tuple[B, list[tuple[int, int, int]]]]:
        try:
            while self._ahead:
                block, future = self._ahead.popleft()
                self._fill()
                yield block, future.result()
        finally:
            self.close()

    def close(self) -> None:
        self._ahead.clear()
        self._pool.shutdown(cancel_futures=True)


class Seen(Generic[R]):
    """Lines read, each with what reading it again must redo (None: nothing), up to MAX_SEEN;
    past that, new lines are read every time (memory stays bounded)."""

    def __init__(self) -> None:
        self.lines: dict[bytes, R | None] = {}

    def remember(self, line: bytes, replay: R | None) -> None:
        if len(self.lines) < MAX_SEEN:
            self.lines[line] = replay
