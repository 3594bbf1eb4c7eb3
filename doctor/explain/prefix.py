"""The one peeling layer: every collector's wrapping comes off a line before it is read, and who
said it and when stay. `doctor explain`, `doctor analyze` (a pasted NCCL log) and the live
allreduce's rank logs all read lines through ``strip_prefixes``.

A wrapping is what a collector or launcher puts around a program's line: colours, a Windows line
end, Ray's ``(Worker pid=N, ip=A)`` prefix and ``[repeated Nx across cluster]`` de-duplication
suffix, ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``, docker compose's ``name  | ``,
journald and syslog headers, ``srun -l``'s task label, torchrun's ``[default0]:`` and
``[rank0]:``, Open MPI's ``[1,0]<stdout>:``, ISO, bracketed and epoch timestamps, glog, and
NCCL's own ``host:pid:tid [dev] file.cc:123 (func)``. They stack in any order.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import NamedTuple

_ISO = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_EPOCH = r"1\d{9}(?:\.\d+)?"  # seconds since 1970, 2001 to 2033 (journald's short-unix)
_SYSLOG_TAIL = r" (?P<host>[\w.-]+) [\w./@-]+?(?:\[(?P<pid>\d+)\])?:\s"

# Each pattern matches at the start of what is left; they are tried until none matches, so
# stacked prefixes (`[pod/a/b] [1,3]<stderr>:[rank3]:[W1122 ...] host:12:34 [0] NCCL WARN`)
# peel in turn. Groups: rank, host, pid, ts (a time), via (the collector's name for where the
# line came from: a Ray worker's address, a pod, a compose service), src (NCCL's source file).
_PATTERNS = [
    # Open MPI --tag-output: "[jobid,rank]<stdout>:"; horovodrun (Gloo): "[rank]<stdout>:".
    r"\[(?:(?P<job>\d+),)?(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:\s?",
    # torchrun --tee / --local-ranks-filter, and older "[default3]:" labels.
    r"\[(?:rank|default)\s?(?P<rank>\d+)\]:\s?",
    # Ray's worker prefix (ray/_private/worker.py print_worker_logs): "(Actor pid=N, ip=A) ",
    # without ", ip=" for workers on the driver's node; "(raylet, ip=A) " for the raylet.
    r"\((?:[^()\s]+ )?pid=(?P<pid>\d+)(?:, ip=(?P<via>[\w.:-]+))?\)\s",
    r"\(raylet(?:, ip=(?P<via>[\w.:-]+))?\)\s",
    # kubectl logs --prefix: "[pod/NAME/CONTAINER] ".
    r"\[pod/(?P<via>[^/\]\s]+)/[^\]\s]+\]\s",
    # syslog (RFC 3164, with a priority or not) and journald's short and short-precise formats:
    # "Nov 22 04:08:11[.123456] host prog[123]: "
    r"(?:<\d{1,3}>)?(?P<sts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})(?:\.\d+)?" + _SYSLOG_TAIL,
    # journald short-iso / short-full-iso and short-unix: "<ISO or epoch> host prog[123]: "
    rf"(?P<ts>{_ISO}|{_EPOCH})" + _SYSLOG_TAIL,
    # syslog RFC 5424: "<34>1 2024-11-22T04:08:11.003Z host app 123 msgid - "
    rf"<\d{{1,3}}>1 (?P<ts>{_ISO}) (?P<host>[\w.-]+) \S+ (?:(?P<pid>\d+)|\S+) \S+ "
    r"(?:-|(?:\[[^\]]*\])+)\s",
    # Timestamps: ISO 8601 alone or in brackets (NCCL_DEBUG_TIMESTAMP_FORMAT, kubectl logs
    # --timestamps, docker logs -t, Python's logging), and epoch seconds (in brackets, or with
    # a fraction: a bare 10-digit number may be a message's).
    rf"\[?(?P<ts>{_ISO})\]?(?:\s*[:|-])?\s+",
    rf"(?=\[|1\d{{9}}\.)\[?(?P<ts>{_EPOCH})\]?(?:\s*[:|-])?\s+",
    # glog / c10 logging: "[W1122 04:08:11.123456 12345 ProcessGroupNCCL.cpp:1234] "
    r"\[?[IWEF](?P<ts>\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?)(?: +(?P<pid>\d+))? [^\]\s]+:\d+\]\s?",
    # srun -l / pdsh-style numeric task labels: "3: "
    r"(?P<rank>\d{1,6}): (?=\S)",
    # docker compose: "name  | " (the service name, padded to the longest one).
    r"(?P<via>[A-Za-z0-9][\w.-]*)\s+\|\s",
    # NCCL_DEBUG: "host:pid:tid [cudaDev] " (then an optional "file.cc:123 (func) "). Last: it
    # is left out for lines without "NCCL " (below).
    (
        r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
        r"(?:(?P<src>[\w./-]+\.\w+):\d+(?: \([^)]*\))? )?(?=[NR]CCL )"
    ),
]
_FIELDS = ("rank", "host", "pid", "ts", "via", "src")


def _numbered(index: int, pattern: str) -> str:
    """Give the pattern's groups unique names (``rank`` -> ``rank_2``) so all fit in one regex."""
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}_{index}>", pattern)


def _compile(patterns: list[str]) -> tuple[re.Pattern[str], dict[int, tuple[int, ...]]]:
    """One alternation that tries ``patterns`` in order at the start (one C call per peel), and
    where each pattern keeps the fields an origin takes.

    Each pattern is wrapped in a group of its own, which closes last, so ``lastindex`` names the
    one that matched; the fields are indexes into Match.groups() of _FIELDS, -1 where the
    pattern has none."""
    regex = re.compile("|".join(f"(?P<p{i}>{_numbered(i, p)})" for i, p in enumerate(patterns)))
    fields: dict[int, tuple[int, ...]] = {}
    for i in range(len(patterns)):
        index = regex.groupindex
        fields[index[f"p{i}"]] = tuple(index.get(f"{name}_{i}", 0) - 1 for name in _FIELDS)
    return regex, fields


# NCCL's own prefix can start with any hostname, so trying it costs a scan of the first word at
# every peel; lines without "CCL " (most) use the alternation without it.
_PREFIX = _compile(_PATTERNS)
_PREFIX_NOT_NCCL = _compile(_PATTERNS[:-1])
_MAX_PEELS = 8
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]")
# Ray's de-duplication (ray/_private/ray_logging LogDeduplicator.formatted): the last line of a
# shape seen from several workers, then " [repeated Nx across cluster]" and, the first time, a
# note in parentheses: the line stands for N lines of other workers that were not printed.
_REPEATED = re.compile(r"\s*\[repeated (?P<n>\d+)x across cluster\](?: \(Ray deduplicates[^)]*\))?")


class Origin(NamedTuple):
    """Who printed a line and when, as far as its wrapping tells."""

    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    time: float | None = None  # seconds since the epoch (UTC when the stamp has no zone)
    via: str | None = None  # the collector's name for the source: a Ray worker's ip, a pod
    src: str | None = None  # the source file NCCL's prefix names (transport/net_ib.cc)
    repeat: int = 0  # lines of other workers this one stands for (Ray's de-duplication)

    def label(self) -> str:
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.host or self.via:
            parts.append(f"{self.host or self.via}" + (f" pid {self.pid}" if self.pid else ""))
        return ", ".join(parts)


_STAMP = re.compile(
    r"(?:(?P<y>\d{4})-)?(?P<mo>\d{2})-?(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<f>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)


@functools.lru_cache(maxsize=4096)
def _epoch(stamp: str) -> float | None:
    """Seconds since the epoch of an ISO, glog (``1122 04:08:11``) or epoch stamp; a glog stamp,
    which has no year, is taken as this year (a syslog stamp, without one either, is not read).

    Cached: a busy log repeats its stamps (many lines in one second, or one microsecond)."""
    if stamp[:1] == "1" and stamp.replace(".", "", 1).isdigit() and len(stamp.split(".")[0]) == 10:
        return float(stamp)
    try:  # ISO 8601, read in C (Python 3.11+; before, "Z" and more go to the regex below)
        iso = _dt.datetime.fromisoformat(stamp)
    except ValueError:
        pass
    else:
        return (iso if iso.tzinfo else iso.replace(tzinfo=_dt.timezone.utc)).timestamp()
    m = _STAMP.fullmatch(stamp)
    if m is None:
        return None
    zone = _dt.timezone.utc
    if m["tz"] and m["tz"] != "Z":
        sign = 1 if m["tz"][0] == "+" else -1
        digits = m["tz"][1:].replace(":", "")
        zone = _dt.timezone(sign * _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    year = int(m["y"]) if m["y"] else _dt.datetime.now(_dt.timezone.utc).year
    micro = int((m["f"] or "0")[:6].ljust(6, "0"))
    try:
        when = _dt.datetime(year, int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]),
                            int(m["s"]), micro, tzinfo=zone)  # fmt: skip
    except ValueError:  # 31 February, hour 25: not a time
        return None
    return when.timestamp()


NOWHERE = Origin()


def unwrap(line: str) -> tuple[str, int]:
    """The line without what wraps the whole of it: a line end, colours, Ray's de-duplication
    suffix; and how many other workers' lines it stands for."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:  # colours from a terminal capture, Ray's prefix and suffix
        line = _ANSI.sub("", line)
    repeat = 0
    if "across cluster]" in line and (r := _REPEATED.search(line)) is not None:
        repeat, line = int(r["n"]), line[: r.start()] + line[r.end() :]
    return line.lstrip("\ufeff \t"), repeat


def strip_prefixes(line: str) -> tuple[str, Origin]:
    """The message without its wrapping, and the origin the wrapping named."""
    rest, repeat = unwrap(line)
    regex, fields = _PREFIX if "CCL " in rest else _PREFIX_NOT_NCCL
    m = regex.match(rest)
    if m is None:  # most messages of tracebacks and plain programs: nothing to peel
        return rest, (NOWHERE if not repeat else Origin(repeat=repeat))
    found: list[str | None] = [None] * len(_FIELDS)
    pos = 0
    for _ in range(_MAX_PEELS):
        if m is None or m.end() == pos:
            break
        groups = m.groups()
        for k, at in enumerate(fields[m.lastindex or 0]):
            if at >= 0 and found[k] is None:
                found[k] = groups[at]
        pos = m.end()
        m = regex.match(rest, pos)
    rank, host, pid, ts, via, src = found
    return rest[pos:], Origin(
        host,
        int(pid) if pid is not None else None,
        int(rank) if rank is not None else None,
        _epoch(ts) if ts is not None else None,
        via,
        src,
        repeat,
    )
