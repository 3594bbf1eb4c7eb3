"""The first pass over a log, at the speed of its bytes: which lines may matter, and which of
them were read already.

Most of a log is lines no verdict needs (progress, metrics, checkpoints), and NCCL-dense text is
the same lines many times over. Two things keep them out of Python:

- One Aho-Corasick pass (ahocorasick_rs, Rust) over each block, for *anchors*: a few dozen
  substrings such that every keyword the catalogue and NCCL's reader look for holds one
  (signatures.json "anchors"). Up to 64 patterns, leftmost-first, the automaton searches with SIMD
  (Teddy): 2 GB/s here, where the full keyword set (over 140, past the SIMD search's limit) runs
  at 0.6 GB/s. The anchors' order there decides the SIMD search's buckets, and so how many false
  candidates it stops at (tests/explain/anchors.py). It releases the GIL, so worker threads
  search the next blocks while Python reads this one's matches (``Ahead``).
- A line already read is not read again: ``Seen`` keeps what reading it did that must happen
  again (the hit it counted, the NCCL version it tallied), and the scanner replays that.

Only a new line holding an anchor goes on to the keyword index and the readers.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from functools import cache
from queue import SimpleQueue
from typing import Generic, TypeVar

import ahocorasick_rs

MAX_SEEN = 1 << 18  # lines remembered (a few tens of MB of bytes at most: lines are cut)
# The interpreter's switch interval while blocks are searched ahead. A search hands its matches
# back holding the GIL, which the reader, busy in Python, gives up only every switch interval
# (5 ms by default): meanwhile that CPU idles. At 1 ms, `doctor explain` of a 200 MB log takes
# 4 % less time on 2 CPUs.
SWITCH = 0.001
R = TypeVar("R")
B = TypeVar("B", bytes, memoryview)
Matches = list[tuple[int, int, int]]  # (anchor, start, end) of each anchor found in a block
# Where a block's search puts what it found, or the error it raised: one slot per block.
Slot = SimpleQueue[Matches | BaseException]


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def searchers() -> int:
    """Search threads beside the reader. On a machine with CPUs to spare, all but one, which the
    reader keeps: its Python is what a log's time waits on, and on 2 CPUs a second search thread
    took that CPU from it while running ahead (`doctor explain` of a 200 MB log took 5 % longer).
    On one with more tasks ready to run than CPUs (a shared login node), one a CPU: there the
    threads' share of the CPUs is what counts, and one thread fewer took 17 % longer."""
    return cpus() if _oversubscribed() else max(1, cpus() - 1)


def _oversubscribed() -> bool:
    """Whether more tasks are ready to run now, this one included, than the machine has CPUs: the
    runnable count of /proc/loadavg (Linux; elsewhere, taken as not). A quiet machine shows 1 or,
    a quarter of the time, 2 (a kernel thread)."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            return int(handle.read().split()[3].split(b"/")[0]) > (os.cpu_count() or 1)
    except (OSError, ValueError, IndexError):
        return False


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

    def find(self, block: bytes | memoryview) -> Matches:
        """(anchor, start, end) of each anchor in ``block``, left to right, not overlapping."""
        return self._find(block)


class Ahead(Generic[B]):
    """Blocks searched by ``workers`` threads ahead of the one being read, in order (at most
    ``depth`` blocks and their matches held at once: by default ``workers`` + 1). The first
    searches start when this is made: made early, they run while the reader is still being
    built.

    Plain threads and queues, not concurrent.futures: importing that (and the logging it
    imports) costs `doctor explain` 5 to 16 ms before its search can start."""

    _open = 0  # how many are open (not closed) in this process
    _switch = 0.005  # the switch interval before the first of them

    def __init__(
        self, blocks: Iterable[B], sieve: Sieve, workers: int, depth: int | None = None
    ) -> None:
        self.sieve = sieve
        self._blocks: Iterator[B] = iter(blocks)
        self._depth = max(depth or 0, workers + 1)
        self._jobs: SimpleQueue[tuple[B, Slot] | None] = SimpleQueue()
        self._ahead: deque[tuple[B, Slot]] = deque()
        self._closed = False
        if not Ahead._open:  # the first of those open at once keeps the interval to restore
            Ahead._switch = sys.getswitchinterval()
            sys.setswitchinterval(min(Ahead._switch, SWITCH))
        Ahead._open += 1
        self._threads = [
            threading.Thread(target=self._search, name="sieve", daemon=True) for _ in range(workers)
        ]
        for thread in self._threads:
            thread.start()
        self._fill()

    def _search(self) -> None:
        while (job := self._jobs.get()) is not None:
            block, out = job
            if self._closed:  # what was queued when the reader stopped is not searched
                out.put([])
                continue
            try:
                out.put(self.sieve.find(block))
            except BaseException as exc:  # handed to the reader, raised there
                out.put(exc)

    def _fill(self) -> None:
        while len(self._ahead) < self._depth:
            block = next(self._blocks, None)
            if block is None:
                return
            out: Slot = SimpleQueue()
            self._jobs.put((block, out))
            self._ahead.append((block, out))

    def __iter__(self) -> Iterator[tuple[B, Matches]]:
        try:
            while self._ahead:
                block, out = self._ahead.popleft()
                self._fill()
                found = out.get()
                if isinstance(found, BaseException):
                    raise found
                yield block, found
        finally:
            self.close()

    def close(self) -> None:
        """Stop: searches under way end (the blocks they hold are released), none starts."""
        if self._closed:
            return
        self._closed = True
        self._ahead.clear()
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        Ahead._open -= 1
        if not Ahead._open:
            sys.setswitchinterval(Ahead._switch)


class Seen(Generic[R]):
    """Lines read, each with what reading it again must redo (None: nothing), up to MAX_SEEN;
    past that, new lines are read every time (memory stays bounded)."""

    def __init__(self) -> None:
        self.lines: dict[bytes, R | None] = {}

    def remember(self, line: bytes, replay: R | None) -> None:
        if len(self.lines) < MAX_SEEN:
            self.lines[line] = replay
