"""A large plain log file scanned in parts, one process per CPU, merged as if read in one go.

The keyword search and the parsing are pure Python and bound to one core; on a gigabyte log the
other cores would sit idle. Each part starts at a line start, is read by a fresh Scanner in its
own process (spawned: nothing of the parent's state is shared), and the parts are absorbed in
file order, so hits keep their order, line numbers and timestamps.
"""

from __future__ import annotations

import gc
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import BinaryIO

from doctor.explain.engine import Partial, Scanner
from doctor.explain.mapped import Mapped, scan_mapped
from doctor.explain.sieve import cpus
from doctor.explain.source import CHUNK, LogReadError


def _next_line(handle: BinaryIO, at: int) -> int:
    """Where the line after the one holding byte ``at`` starts (the end of the file if none).

    Read in chunks, not with readline: a gigabyte without a newline must not be held at once."""
    handle.seek(at)
    while chunk := handle.read(CHUNK):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return at


def part_bounds(path: str, size: int, parts: int, start: int = 0) -> list[tuple[int, int]]:
    """``parts`` byte ranges covering the file from ``start`` (a line start), each starting at
    the start of a line."""
    starts = [start]
    with open(path, "rb") as handle:
        for k in range(1, parts):
            at = _next_line(handle, max(starts[-1], start + (size - start) * k // parts))
            if at >= size:
                break
            if at > starts[-1]:
                starts.append(at)
    return list(zip(starts, [*starts[1:], size], strict=True))


def scan_range(path: str, start: int, end: int) -> Partial:
    """Scan bytes [start, end) of ``path`` (whole lines) with a fresh Scanner."""
    scanner = Scanner()
    try:
        with open(path, "rb") as handle:
            # One sieve thread: the other CPUs scan the other parts.
            part = Mapped(path, handle.fileno(), scanner.sieve, start, end, workers=1)
            scan_mapped(scanner, part)
    except OSError as exc:
        raise LogReadError(f"{path}: {exc.strerror or exc}") from None
    return scanner.partial()


def start_children(count: int) -> ProcessPoolExecutor:
    """``count`` child processes, started now: each sets itself up (a new interpreter, this
    module's imports, the catalogue's patterns compiled) while this process reads the log's head,
    instead of after it (about 0.15 s of a 200 MB log's second). Shut down by the caller."""
    context = multiprocessing.get_context("spawn")
    children = ProcessPoolExecutor(count, mp_context=context, initializer=_ready)
    for _ in range(count):
        children.submit(int)  # a process is started by a task given to it
    return children


def _ready() -> None:
    gc.disable()  # the parts' processes collect no cyclic garbage either (doctor/cli/main.py)
    for signature in Scanner().signatures:
        signature.patterns  # noqa: B018 (compiled here, before there is a part to read)


def scan_file(
    scanner: Scanner,
    path: str,
    size: int,
    min_part: int,
    children: ProcessPoolExecutor,
    start: int = 0,
    lines_before: int = 0,
) -> None:
    """Scan ``path`` from ``start`` (a line start, after ``lines_before`` lines this scanner
    read already) in parts of at least ``min_part`` bytes, one per CPU, the first here and the
    rest in ``children`` (start_children), into ``scanner``."""
    parts = max(1, min(cpus(), (size - start) // max(1, min_part)))
    bounds = part_bounds(path, size, parts, start)
    before = scanner.result.lines - lines_before
    later = [children.submit(scan_range, path, *b) for b in bounds[1:]]
    scanner.absorb(scan_range(path, *bounds[0]), lines_before)
    for future in later:
        try:
            part = future.result()
        except BrokenProcessPool:  # killed (out of memory, a signal): keep what was read
            raise LogReadError(f"{path}: a process scanning part of it died") from None
        scanner.absorb(part, scanner.result.lines - before)
