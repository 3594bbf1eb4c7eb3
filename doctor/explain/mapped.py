"""A plain log file read through mmap: no copy of the log enters Python, only the lines the sieve
keeps (doctor/explain/sieve.py), and its lines are counted outside Python.

The sieve searches windows of the mapping in a worker thread; the scanner reads the lines it
found straight from the mapping. Counting 2 million newlines is the one whole-file job left:
Python's bytes.count runs at about 2 GB/s and holds the GIL, `wc -l` runs at memory speed in its
own process beside the scan, so the count of a whole file comes from it (and from Python where
wc is missing or fails, or the file changed under it).
"""

from __future__ import annotations

import mmap
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

from doctor.explain.sieve import Ahead, Sieve, cpus
from doctor.explain.source import GZIP_MAGIC

if TYPE_CHECKING:
    from doctor.explain.engine import Scanner

WINDOW = 8 << 20  # bytes the sieve searches at a time: a window ends just after a newline


def windows(mm: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Byte ranges covering [start, end), each ending just after a newline where the window
    holds one (a longer line is cut at the window, and goes on in the next)."""
    at = start
    while at < end:
        stop = min(at + WINDOW, end)
        if stop < end:
            newline = mm.rfind(b"\n", at, stop)
            stop = newline + 1 if newline >= 0 else stop
        yield at, stop
        at = stop


class _Counter:
    """`wc -l` of the whole file, started now, read when the scan is done."""

    def __init__(self, path: str, size: int) -> None:
        self.size = size
        wc = shutil.which("wc")
        self.proc = None
        if wc is not None:
            self.proc = subprocess.Popen(
                [wc, "-l", "--", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )

    def newlines(self, path: str) -> int | None:
        if self.proc is None:
            return None
        out, _ = self.proc.communicate()
        words = out.split()
        try:
            unchanged = os.stat(path).st_size == self.size
        except OSError:
            unchanged = False
        if self.proc.returncode != 0 or not words or not words[0].isdigit() or not unchanged:
            return None
        return int(words[0])


class Mapped:
    """A plain file (or bytes [start, end) of it, a range that starts at a line start) mapped,
    its windows searched ahead from the moment this is made, its lines counted by `wc -l` beside
    the scan when it is the whole file."""

    def __init__(self, path: str, handle: int, sieve: Sieve, start: int = 0, end: int = -1):
        self.path = path
        size = os.fstat(handle).st_size
        self.start, self.end = start, size if end < 0 else end
        self.counter = _Counter(path, size) if (start, self.end) == (0, size) else None
        self.mm = mmap.mmap(handle, 0, access=mmap.ACCESS_READ) if self.end > start else None
        self.ranges: list[tuple[int, int]] = []
        self.ahead: Ahead[memoryview] | None = None
        if self.mm is not None:
            self.mm.madvise(mmap.MADV_SEQUENTIAL)
            self.ranges = list(windows(self.mm, start, self.end))
            whole = memoryview(self.mm)
            self.ahead = Ahead((whole[a:b] for a, b in self.ranges), sieve, cpus())

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        if self.mm is not None:
            self.mm.close()


def read_ahead(names: list[str], sieve: Sieve) -> dict[str, Mapped]:
    """The first named plain file (not stdin, not gzip), mapped and searched from now on: what
    `doctor explain` starts before it loads the rest of the reader."""
    for name in names:
        if name == "-":
            continue
        try:
            with open(name, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode) or handle.read(2) == GZIP_MAGIC:
                    continue
                return {name: Mapped(name, handle.fileno(), sieve)}
        except (OSError, ValueError):  # the scan says what is wrong with it
            continue
    return {}


def scan_mapped(scanner: Scanner, mapped: Mapped) -> int:
    """Scan a mapped file (or range) and return how many lines it held."""
    mm, lines = mapped.mm, 0
    try:
        if mm is not None and mapped.ahead is not None:
            at_line = (1, mapped.start, mapped.start)
            released = mapped.start - mapped.start % mmap.PAGESIZE
            for (a, b), (view, anchored) in zip(mapped.ranges, mapped.ahead, strict=True):
                at_line = scanner.feed_mapped(mm, a, b, anchored, mapped.path, at_line)
                view.release()
                # Pages read are handed back: the file's pages stay in the page cache, but not
                # in this process's resident memory (what was kept of them is copied out).
                upto = b - b % mmap.PAGESIZE
                if upto > released:
                    mm.madvise(mmap.MADV_DONTNEED, released, upto - released)
                    released = upto
            counted = mapped.counter.newlines(mapped.path) if mapped.counter else None
            if counted is None:
                counted = sum(mm[a:b].count(b"\n") for a, b in mapped.ranges)
            lines = counted + (mm[mapped.end - 1 : mapped.end] != b"\n")
    finally:
        mapped.close()
    scanner.result.lines += lines
    return lines
