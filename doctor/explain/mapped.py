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
import subprocess
from collections.abc import Iterator

from doctor.explain.engine import Scanner
from doctor.explain.sieve import cpus, matched

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


def scan_mapped(scanner: Scanner, path: str, handle: int, start: int = 0, end: int = -1) -> int:
    """Scan bytes [start, end) of an open regular file (``end`` -1: to its end; a range starts
    at a line start) and return how many lines they held; the whole file's are counted by
    `wc -l` beside the scan."""
    size = os.fstat(handle).st_size
    end = size if end < 0 else end
    if end <= start:
        return 0
    counter = _Counter(path, size) if (start, end) == (0, size) else None
    with mmap.mmap(handle, 0, access=mmap.ACCESS_READ) as mm:
        mm.madvise(mmap.MADV_SEQUENTIAL)
        ranges = list(windows(mm, start, end))
        whole = memoryview(mm)
        try:
            views = (whole[a:b] for a, b in ranges)
            at_line = (1, start, start)
            for (a, b), (view, anchored) in zip(
                ranges, matched(views, scanner.sieve, cpus()), strict=True
            ):
                at_line = scanner.feed_mapped(mm, a, b, anchored, path, at_line)
                view.release()
        finally:
            whole.release()
        counted = counter.newlines(path) if counter is not None else None
        if counted is None:
            counted = sum(mm[a:b].count(b"\n") for a, b in ranges)
        lines = counted + (mm[end - 1 : end] != b"\n")
    scanner.result.lines += lines
    return lines
