"""Read the named logs into a Scanner: a plain file through mmap (mapped.py), gzip and stdin in
blocks; a large plain file on every CPU."""

from __future__ import annotations

import io
import os
import stat
import time
from collections import deque
from collections.abc import Iterable, Iterator

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
# How far over WORTH_PROCESSES the head's first quarter must put the rest for the processes to be
# started then: a log's first lines cost most (each is new), so its estimate only falls as more
# is read. Measured on bench/explain_bench.py's logs: 1.2 s (dense) and 1.3 s (unique) after
# the first quarter, against 0.4 s for the mixed log, which stays below WORTH_PROCESSES.
LIKELY = 2.5
# A hung job's evidence (watchdog lines, pasted stacks, the tools' reports) is read from every log
# this small, and from the last HANG_TAIL bytes of a larger one where a hang was seen in the logs
# (a job that hung left it at its end; its watchdog lines only, found in one Aho-Corasick pass).
# A large log without a hang costs nothing more.
HANG_SMALL = 8 << 20
HANG_TAIL = 1 << 20
HANG_SIGNS = ("torch.nccl.", "gloo.op_timeout", "horovod.", "torch.store.wait_timeout")


def explain(
    names: Iterable[str],
    scanner: Scanner | None = None,
    parallel_from: int = PARALLEL_FROM,
    ahead: dict[str, Mapped] | None = None,
    worth: float = WORTH_PROCESSES,
    hosts: dict[str, str] | None = None,
) -> Explanation:
    """Scan every named log (``-`` is stdin); a plain file of ``parallel_from`` bytes or more is
    scanned in parts on every CPU where its head shows the rest would take ``worth`` seconds or
    more here. ``ahead``: files mapped and searched already (read_ahead), by a sieve over the
    same anchors (else searched again). ``hosts``: the node each log is the output of, where
    the caller knows (doctor run): the printer of a signature and of a hang's evidence whose
    lines do not say.

    A log that cannot be opened raises LogReadError; one that breaks part-way (a truncated
    gzip) keeps what was read and is noted in ``errors``.
    """
    scanner = scanner or Scanner()
    names = list(names)
    tails: dict[str, tuple[bytes, bool]] = {}
    try:
        for name in names:
            _one(scanner, name, ahead or {}, parallel_from, worth, tails)
    finally:
        for left in (ahead or {}).values():  # named twice, not reached, or an error: free it
            left.close()
    for hit in scanner.result.hits.values():
        if not hit.hosts and hit.source in (hosts or {}):  # its lines named no host: the log's
            hit.hosts.add((hosts or {})[hit.source])
    _hang(scanner.result, names, tails, hosts or {})
    return scanner.result


def _hang(
    result: Explanation,
    names: list[str],
    tails: dict[str, tuple[bytes, bool]],
    hosts: dict[str, str],
) -> None:
    """Read the hang evidence of the logs (doctor/explain/hang/written.py) into ``result.hang``:
    a small log whole, a large one's tail where a hang was seen in the logs."""
    hung = any(h.signature.code.startswith(HANG_SIGNS) for h in result.hits.values())
    read: dict[str, tuple[bytes, bool]] = {}
    for name in dict.fromkeys(names):
        if name not in tails and not hung and _size(name) > HANG_SMALL:
            continue  # a large log without a hang: not read again
        data, whole = tails[name] if name in tails else _tail(name)
        if data and (whole or hung):
            read[name] = (data, whole)
    from doctor.explain.hang.signs import shows_hang

    if not any(shows_hang(data) for data, _ in read.values()):
        return  # nothing a hang leaves: the readers are not even imported
    from doctor.explain.hang.written import Written, file_ranks  # only where a hang may be

    written = Written()
    ranks = file_ranks(n for n in read if n != "-")
    for name, (data, whole) in read.items():
        written.read(name, data, ranks.get(name), hosts.get(name, ""), stacks=whole)
    held: dict[int, set[str]] = {}
    for host, pid in result.nccl.processes:
        if host and pid:
            held.setdefault(pid, set()).add(host)
    result.hang = written.facts({pid: h.pop() for pid, h in held.items() if len(h) == 1})
    result.hang_sources = written.sources
    result.exits = list(written.exited.values())


def _size(name: str) -> int:
    try:
        return os.stat(name).st_size
    except OSError:
        return 0


def _tail(name: str) -> tuple[bytes, bool]:
    """A plain file whole where it is small, else its last HANG_TAIL bytes from a line's start;
    and whether that is the whole file. (A gzip log and stdin were kept as they were read.)"""
    try:
        with open(name, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return b"", False
            if info.st_size <= HANG_SMALL:
                return f.read(HANG_SMALL), True
            f.seek(info.st_size - HANG_TAIL)
            f.readline()
            return f.read(HANG_TAIL), False
    except OSError:
        return b"", False


def _kept(blocks: Iterator[bytes], into: deque[bytes], whole: list[bool]) -> Iterator[bytes]:
    """Pass blocks on, keeping the last HANG_SMALL bytes of them at least (stdin cannot be read
    twice); ``whole`` says whether nothing was let go."""
    held = 0
    for block in blocks:
        into.append(block)
        held += len(block)
        while held - len(into[0]) >= HANG_SMALL:
            held -= len(into.popleft())
            whole[0] = False
        yield block


def _one(
    scanner: Scanner,
    name: str,
    ahead: dict[str, Mapped],
    parallel_from: int,
    worth: float,
    tails: dict[str, tuple[bytes, bool]],
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
        kept: deque[bytes] = deque()
        whole = [True]
        blocks = _kept(iter_blocks(stream, name), kept, whole)
        try:
            for block, anchored in Ahead(blocks, scanner.sieve, searchers()):
                line_no += scanner.feed_block(block, name, line_no, anchored)
        finally:
            tails[name] = (b"".join(kept), whole[0])
    except LogReadError as exc:
        scanner.result.errors.append(str(exc))
    finally:
        if name != "-":
            stream.close()


def _plain(scanner: Scanner, mapped: Mapped, size: int, parallel_from: int, worth: float) -> None:
    """A plain file: read here, or, where it is large and its head shows that the rest would
    keep this process busy for longer than starting processes takes (lines that do not repeat,
    each read in Python), its rest in parts on every CPU. The processes are started as soon as
    the head's first part shows them LIKELY to be worth it, so that they are ready when the
    head is read."""
    if size < parallel_from or cpus() < 2:
        scan_mapped(scanner, mapped)
        return
    head_end = min(HEAD, parallel_from // 4)
    children = None
    try:
        started = time.thread_time()
        for until in (head_end // 4, head_end):
            mapped.scan(scanner, until=until)
            took, done = time.thread_time() - started, max(1, mapped.read_to)
            rest = took * (size - done) / done
            if children is None and not mapped.done and rest >= worth * LIKELY:
                from doctor.explain.parallel import start_children  # process pools: only here

                children = start_children(cpus() - 1)
        at_line_start = mapped.mm is not None and mapped.mm[done - 1 : done] == b"\n"
        if mapped.done or not at_line_start or rest < worth:
            scan_mapped(scanner, mapped)
            return
        from doctor.explain.parallel import scan_file, start_children

        children = children or start_children(cpus() - 1)  # worth it, though not LIKELY early

        head = mapped.lines()
        mapped.close()
        scanner.result.lines += head
        # Parts of half that size at least: a smaller part costs more in process start than it
        # saves.
        scan_file(
            scanner, mapped.path, size, parallel_from // 2, children, start=done, lines_before=head
        )
    finally:
        if children is not None:
            children.shutdown(cancel_futures=True)
