"""Read the named logs into a Scanner: a plain file through mmap (mapped.py), gzip and stdin in
blocks; a large plain file on every CPU."""

from __future__ import annotations

import io
import os
import stat
import time
from collections.abc import Iterable

from doctor.explain.engine import Explanation, Scanner
from doctor.explain.mapped import Mapped, scan_mapped
from doctor.explain.sieve import Ahead, cpus, searchers
from doctor.explain.source import LogReadError, iter_blocks, open_log

PARALLEL_FROM = 64 << 20  # bytes: a plain log this large may be scanned on every CPU
HEAD = 16 << 20  # bytes read here first, to see what the rest would cost
# CPU seconds of reading left, past which the rest goes to a process per CPU: starting one (its
# imports) costs about 0.15 s, and a log whose lines repeat is read faster than that. CPU time,
# not wall time: on a busy machine the head takes longer to read, not more work, and processes
# started for it there doubled the CPU `doctor explain` of a 200 MB log used.
WORTH_PROCESSES = 0.4


def explain(
    names: Iterable[str],
    scanner: Scanner | None = None,
    parallel_from: int = PARALLEL_FROM,
    ahead: dict[str, Mapped] | None = None,
    worth: float = WORTH_PROCESSES,
) -> Explanation:
    """Scan every named log (``-`` is stdin); a plain file of ``parallel_from`` bytes or more is
    scanned in parts on every CPU where its head shows the rest would take ``worth`` seconds or
    more here. ``ahead``: files mapped and searched already (read_ahead), by a sieve over the
    same anchors (else searched again).

    A log that cannot be opened raises LogReadError; one that breaks part-way (a truncated
    gzip) keeps what was read and is noted in ``errors``.
    """
    scanner = scanner or Scanner()
    try:
        for name in names:
            _one(scanner, name, ahead or {}, parallel_from, worth)
    finally:
        for left in (ahead or {}).values():  # named twice, not reached, or an error: free it
            left.close()
    return scanner.result


def _one(
    scanner: Scanner, name: str, ahead: dict[str, Mapped], parallel_from: int, worth: float
) -> None:
    stream = open_log(name)
    scanner.result.sources.append(name)
    try:
        if name != "-" and isinstance(stream, io.BufferedReader):  # not stdin, not gzip
            info = os.fstat(stream.fileno())
            if stat.S_ISREG(info.st_mode):
                early = ahead.pop(name, None)
                searched = early.ahead if early is not None else None
                if early is not None and searched and searched.sieve != scanner.sieve:
                    early.close()  # another catalogue's anchors: search again
                    early = None
                mapped = early or Mapped(name, stream.fileno(), scanner.sieve)
                _plain(scanner, mapped, info.st_size, parallel_from, worth)
                return
        line_no = 1
        for block, anchored in Ahead(iter_blocks(stream, name), scanner.sieve, searchers()):
            line_no += scanner.feed_block(block, name, line_no, anchored)
    except LogReadError as exc:
        scanner.result.errors.append(str(exc))
    finally:
        if name != "-":
            stream.close()


def _plain(scanner: Scanner, mapped: Mapped, size: int, parallel_from: int, worth: float) -> None:
    """A plain file: read here, or, where it is large and its head shows that the rest would
    keep this process busy for longer than starting processes takes (lines that do not repeat,
    each read in Python), its rest in parts on every CPU."""
    if size < parallel_from or cpus() < 2:
        scan_mapped(scanner, mapped)
        return
    started = time.thread_time()
    mapped.scan(scanner, until=min(HEAD, parallel_from // 4))
    took, done = time.thread_time() - started, max(1, mapped.read_to)
    at_line_start = mapped.mm is not None and mapped.mm[done - 1 : done] == b"\n"
    if mapped.done or not at_line_start or took * (size - done) / done < worth:
        scan_mapped(scanner, mapped)
        return
    from doctor.explain.parallel import scan_file  # process pools: only here

    head = mapped.lines()
    mapped.close()
    scanner.result.lines += head
    # Parts of half that size at least: a smaller part costs more in process start than it saves.
    scan_file(scanner, mapped.path, size, parallel_from // 2, start=done, lines_before=head)
