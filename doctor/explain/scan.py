"""Read the named logs into a Scanner: a plain file through mmap (mapped.py), gzip and stdin in
blocks; a large plain file on every CPU."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable

from doctor.explain.engine import Explanation, Scanner
from doctor.explain.mapped import Mapped, scan_mapped
from doctor.explain.sieve import cpus, matched
from doctor.explain.source import LogReadError, iter_blocks, open_log

PARALLEL_FROM = 1 << 30  # bytes: a plain log this large is scanned on every CPU (below, the
# spawned processes cost more than the sieve and its threads leave to do)


def explain(
    names: Iterable[str],
    scanner: Scanner | None = None,
    parallel_from: int = PARALLEL_FROM,
    ahead: dict[str, Mapped] | None = None,
) -> Explanation:
    """Scan every named log (``-`` is stdin); a plain file of ``parallel_from`` bytes or more is
    scanned in parts on every CPU. ``ahead``: files mapped and searched already (read_ahead), by
    a sieve over the same anchors (else searched again).

    A log that cannot be opened raises LogReadError; one that breaks part-way (a truncated
    gzip) keeps what was read and is noted in ``errors``.
    """
    scanner = scanner or Scanner()
    result = scanner.result
    for name in names:
        stream = open_log(name)
        result.sources.append(name)
        line_no = 1
        try:
            if name != "-" and isinstance(stream, io.BufferedReader):  # not stdin, not gzip
                info = os.fstat(stream.fileno())
                if stat.S_ISREG(info.st_mode) and info.st_size >= parallel_from:
                    from doctor.explain.parallel import scan_file  # process pools: only here

                    # Parts of half that size at least: a smaller part costs more in process
                    # start than it saves.
                    scan_file(scanner, name, info.st_size, parallel_from // 2)
                    continue
                if stat.S_ISREG(info.st_mode):
                    early = ahead.pop(name, None) if ahead else None
                    searched = early.ahead if early is not None else None
                    if early is not None and searched and searched.sieve != scanner.sieve:
                        early.close()  # another catalogue's anchors: search again
                        early = None
                    mapped = early or Mapped(name, stream.fileno(), scanner.sieve)
                    scan_mapped(scanner, mapped)
                    continue
            for block, anchored in matched(iter_blocks(stream, name), scanner.sieve, cpus()):
                line_no += scanner.feed_block(block, name, line_no, anchored)
        except LogReadError as exc:
            result.errors.append(str(exc))
        finally:
            if name != "-":
                stream.close()
    for left in (ahead or {}).values():  # named twice, or not reached: free its mapping
        left.close()
    return result
