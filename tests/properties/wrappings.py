"""Every collector's wrapping of a log line, written from each tool's documented format (nothing
here is copied from a real log): what tests/properties/test_wrappings.py puts around the
project's own healthy logs.

- Ray (ray/_private/worker.py ``print_worker_logs``): ``(Actor pid=N, ip=A) `` in dim cyan, no
  ``ip=`` for a worker on the driver's node; its de-duplication (ray_logging LogDeduplicator)
  prints the last line of a shape seen from several workers with `` [repeated Nx across
  cluster]`` in green, and the first time a note in parentheses.
- ``kubectl logs --prefix``: ``[pod/NAME/CONTAINER] ``; ``--timestamps``: RFC 3339 with
  nanoseconds.
- ``docker compose logs``: ``name-1  | `` (the service padded to the longest name).
- journald (``journalctl -o short``, ``short-precise``, ``short-iso``, ``short-unix``) and syslog
  (RFC 3164 with a priority, RFC 5424).
- launchers: ``srun -l`` ``N: ``, torchrun ``--tee`` ``[defaultN]:`` and its ``[rankN]:``, Open MPI
  ``--tag-output`` ``[1,N]<stdout>:``.
- timestamps: ISO 8601, bracketed (NCCL_DEBUG_TIMESTAMP_FORMAT, Python's logging), epoch seconds.
- ANSI colours around the line, and a Windows line end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# The "host:pid:tid [dev]" NCCL puts before its lines: a wrapper names the same process.
_NCCL = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):\d+ \[\d+\] ")
T0 = 1732248491  # 2024-11-22 04:08:11 UTC


@dataclass(frozen=True)
class Source:
    """Who printed a line, as its collector knows it (from the line's NCCL prefix if any)."""

    host: str
    pid: int
    index: int  # the worker's number: a rank, a pod, a container
    line_no: int


Form = Callable[[str, Source], str]


def sources(lines: list[str]) -> list[Source]:
    """Each line's source: its NCCL prefix's process, else the last one seen (a collector
    reads one process's stream), numbered in order of appearance."""
    seen: dict[tuple[str, int], int] = {}
    host, pid = "node1", 4242
    out = []
    for n, line in enumerate(lines):
        if (m := _NCCL.search(line)) is not None:
            host, pid = m["host"], int(m["pid"])
        index = seen.setdefault((host, pid), len(seen))
        out.append(Source(host, pid, index, n))
    return out


def _iso(n: int, sep: str = "T", frac: str = ".123456789", zone: str = "Z") -> str:
    h, m, s = 4 + n // 3600 % 20, n // 60 % 60, n % 60
    return f"2024-11-22{sep}{h:02d}:{m:02d}:{s:02d}{frac}{zone}"


def _ip(src: Source) -> str:
    return f"10.0.{src.index // 250}.{src.index % 250 + 1}"


FORMS: dict[str, Form] = {
    "ray": lambda line, s: (
        f"\x1b[2m\x1b[36m(RayWorkerWrapper pid={s.pid}, ip={_ip(s)})\x1b[0m " + line
    ),
    "ray-local": lambda line, s: f"(RayWorkerWrapper pid={s.pid}) {line}",
    "kubectl-prefix": lambda line, s: f"[pod/{s.host}/trainer] {line}",
    "kubectl-timestamps": lambda line, s: f"{_iso(s.line_no)} {line}",
    "compose": lambda line, s: f"{s.host}-{s.index + 1}  | {line}",
    "journald-short": lambda line, s: (
        f"Nov 22 04:08:{s.line_no % 60:02d} {s.host} python3[{s.pid}]: {line}"
    ),
    "journald-precise": lambda line, s: (
        f"Nov 22 04:08:{s.line_no % 60:02d}.123456 {s.host} python3[{s.pid}]: {line}"
    ),
    "journald-iso": lambda line, s: (
        f"{_iso(s.line_no, frac='', zone='+0000')} {s.host} python3[{s.pid}]: {line}"
    ),
    "journald-unix": lambda line, s: f"{T0 + s.line_no}.123456 {s.host} python3[{s.pid}]: {line}",
    "syslog-3164": lambda line, s: (
        f"<14>Nov 22 04:08:{s.line_no % 60:02d} {s.host} train[{s.pid}]: {line}"
    ),
    "syslog-5424": lambda line, s: (
        f"<14>1 {_iso(s.line_no, frac='.003')} {s.host} train {s.pid} - - {line}"
    ),
    "srun-l": lambda line, s: f"{s.index}: {line}",
    "torchrun-tee": lambda line, s: f"[default{s.index}]:{line}",
    "torchrun-rank": lambda line, s: f"[rank{s.index}]:{line}",
    "mpirun-tag": lambda line, s: f"[1,{s.index}]<stdout>:{line}",
    "iso": lambda line, s: f"{_iso(s.line_no, frac='.104211')} {line}",
    "bracketed": lambda line, s: f"[{_iso(s.line_no, ' ', ',104', '')}] {line}",
    "epoch": lambda line, s: f"[{T0 + s.line_no}.104] {line}",
    "ansi": lambda line, s: f"\x1b[1;32m{line}\x1b[0m",
    "crlf": lambda line, s: line + "\r",
}


def wrap(lines: list[str], forms: list[str]) -> list[str]:
    """The lines wrapped in each form in turn (the first innermost)."""
    where = sources(lines)
    for name in forms:
        lines = [FORMS[name](line, s) for line, s in zip(lines, where, strict=True)]
    return lines


def _shape(line: str) -> str:
    """Ray's de-duplication key: the words without digits (ray_logging _canonicalise_log_line)."""
    return " ".join(w for w in line.split() if not re.search(r"\d+|0x[0-9a-fA-F]+", w))


def ray_deduplicated(lines: list[str]) -> list[str]:
    """The lines as Ray prints them with its de-duplication on: a line of a shape already
    printed by another worker is held back, and at the end the last one held back of each
    shape is printed once with how many were held back (each line behind Ray's prefix)."""
    where = sources(lines)
    first: dict[str, tuple[int, int]] = {}  # shape -> (worker, times held back)
    held: dict[str, tuple[str, Source]] = {}
    out = []
    for line, s in zip(lines, where, strict=True):
        key = _shape(line)
        worker, count = first.get(key, (s.index, 0))
        if key and key in first and worker != s.index:
            first[key] = (worker, count + 1)
            held[key] = (line, s)
            continue
        first.setdefault(key, (s.index, 0))
        out.append(FORMS["ray"](line, s))
    for key, (line, s) in held.items():
        count = first[key][1]
        suffix = f" [repeated {count}x across cluster]" if count > 1 else ""
        out.append(FORMS["ray"](line, s) + (f"\x1b[32m{suffix}\x1b[0m" if suffix else ""))
    return out
