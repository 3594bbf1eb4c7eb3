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
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

from doctor.core.files import open_regular
from doctor.explain.sieve import Ahead, Sieve, searchers
from doctor.explain.source import GZIP_MAGIC

if TYPE_CHECKING:
    from doctor.explain.engine import Scanner

WINDOW = 8 << 20  # bytes the sieve searches at a time: a window ends just after a newline
# Bytes of windows searched ahead of the reader. While the reader loads (imports, the catalogue:
# 50 ms), the sieve's threads search this far into the file rather than waiting for it; its
# pages stay resident until read: up to 48 MiB of the file.
AHEAD = 48 << 20


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
    """`wc -l` of the whole file, started now, read when the scan is done. Spawned by
    os.posix_spawnp rather than subprocess: importing subprocess would cost `doctor explain`
    4 to 12 ms before its search can start (doctor/cli/main.py)."""

    def __init__(self, path: str, size: int) -> None:
        self.size = size
        self.pid: int | None = None
        read, write = os.pipe()  # both closed in wc by exec; its stdout is a copy of write
        try:
            self.pid = os.posix_spawnp(
                "wc",
                ["wc", "-l", "--", path],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, write, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
            )
        except OSError:  # no wc here: the lines are counted in Python
            os.close(read)
            read = -1
        os.close(write)
        self.out = read

    def _end(self, kill: bool) -> int | None:
        """wc's exit status (None if it was killed); its pipe closed, the process reaped."""
        if self.pid is None:
            return None
        if kill:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        os.close(self.out)
        return os.waitstatus_to_exitcode(status)

    def stop(self) -> None:
        """Not needed after all (the scan stopped): end wc, if it still runs."""
        self._end(kill=True)

    def newlines(self, path: str) -> int | None:
        if self.pid is None:
            return None
        with open(self.out, "rb", closefd=False) as pipe:
            out = pipe.read(4096)
        code = self._end(kill=False)
        words = out.split()
        try:
            unchanged = os.stat(path).st_size == self.size
        except OSError:
            unchanged = False
        if code != 0 or not words or not words[0].isdigit() or not unchanged:
            return None
        return int(words[0])


class Mapped:
    """A plain file (or bytes [start, end) of it, a range that starts at a line start) mapped,
    its windows searched ahead from the moment this is made, its lines counted by `wc -l` beside
    the scan when it is the whole file. ``scan`` reads its windows, all or up to a point."""

    def __init__(
        self,
        path: str,
        handle: int,
        sieve: Sieve,
        start: int = 0,
        end: int = -1,
        workers: int | None = None,
    ):
        self.path = path
        size = os.fstat(handle).st_size
        self.start, self.end = start, size if end < 0 else end
        self.read_to = start  # where the windows read so far end
        self.counter = _Counter(path, size) if (start, self.end) == (0, size) else None
        self.mm = mmap.mmap(handle, 0, access=mmap.ACCESS_READ) if self.end > start else None
        self.ranges: list[tuple[int, int]] = []
        self.ahead: Ahead[memoryview] | None = None
        self._windows: Iterator[tuple[tuple[int, int], tuple[memoryview, list]]] = iter(())
        self._at_line = (1, start, start)
        self._released = start - start % mmap.PAGESIZE
        if self.mm is not None:
            self.mm.madvise(mmap.MADV_SEQUENTIAL)
            self.ranges = list(windows(self.mm, start, self.end))
            self._whole = memoryview(self.mm)
            views = (self._whole[a:b] for a, b in self.ranges)
            self.ahead = Ahead(views, sieve, workers or searchers(), AHEAD // WINDOW)
            self._windows = zip(self.ranges, self.ahead, strict=True)

    @property
    def done(self) -> bool:
        return self.read_to >= self.end

    def scan(self, scanner: Scanner, until: int | None = None) -> None:
        """Read the windows in order, up to the one that reaches ``until`` (None: all)."""
        mm = self.mm
        if mm is None:
            return
        for (a, b), (view, anchored) in self._windows:
            self._at_line = scanner.feed_mapped(mm, a, b, anchored, self.path, self._at_line)
            view.release()
            self.read_to = b
            # Pages read are handed back: the file's pages stay in the page cache, but not
            # in this process's resident memory (what was kept of them is copied out).
            upto = b - b % mmap.PAGESIZE
            if upto > self._released:
                mm.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
                self._released = upto
            if until is not None and b >= until:
                return

    def lines(self) -> int:
        """The lines of what was read (the whole file's from `wc -l` when all was read)."""
        mm = self.mm
        if mm is None or self.read_to <= self.start:
            return 0
        counted = self.counter.newlines(self.path) if self.counter and self.done else None
        if counted is None:
            counted = sum(mm[a:b].count(b"\n") for a, b in self.ranges if b <= self.read_to)
        return counted + (mm[self.read_to - 1 : self.read_to] != b"\n")

    def close(self) -> None:
        if self.counter is not None:
            self.counter.stop()
        if self.ahead is not None:
            self.ahead.close()
            self._windows = iter(())  # its views of the mapping go with it
            self.ahead = None
            self._whole.release()
        if self.mm is not None:
            self.mm.close()
            self.mm = None


def read_ahead(names: list[str], sieve: Sieve) -> dict[str, Mapped]:
    """The first named plain file (not stdin, not gzip), mapped and searched from now on: what
    `doctor explain` starts before it loads the rest of the reader."""
    for name in names:
        if name == "-":
            continue
        try:
            with open_regular(name) as handle:  # never blocks on a FIFO
                if handle.read(2) == GZIP_MAGIC:
                    continue
                return {name: Mapped(name, handle.fileno(), sieve)}
        except (OSError, ValueError):  # the scan says what is wrong with it
            continue
    return {}


def scan_mapped(scanner: Scanner, mapped: Mapped) -> int:
    """Scan (the rest of) a mapped file or range and return how many lines it held."""
    try:
        mapped.scan(scanner)
        lines = mapped.lines()
    finally:
        mapped.close()
    scanner.result.lines += lines
    return lines
