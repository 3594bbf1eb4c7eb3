"""The one peeling layer: every collector's wrapping comes off a line before it is read, and who
said it and when stay. `doctor explain`, `doctor analyze` (a pasted NCCL log) and the live
allreduce's rank logs all read lines through ``strip_prefixes``.

A wrapping is what a collector or launcher puts around a program's line: colours, a Windows line
end, Ray's ``(Worker pid=N, ip=A)`` prefix and ``[repeated Nx across cluster]`` de-duplication
suffix, ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``, docker compose's ``name  | ``,
journald and syslog headers, ``srun -l``'s task label, torchrun's ``[default0]:`` and
``[rank0]:``, Open MPI's ``[1,0]<stdout>:``, ISO, bracketed and epoch timestamps, glog, and
NCCL's own ``host:pid:tid [dev] file.cc:123 (func)``. They stack in any order, but for two
signs of a second writer's line spliced into this one (two processes writing one stream at once:
``[rank3]:[E1127 ...] [Rank 3] Watchd[rank5]:[E1127 ...] ...``): anything but NCCL's prefix
after a logger's header, or a launcher's label naming another rank than the same label before.
Peeling stops there and takes nothing of the splice; ``splice_at`` finds one inside a message.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import NamedTuple

_ISO = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_EPOCH = r"1\d{9}(?:\.\d+)?"  # seconds since 1970, 2001 to 2033 (journald's short-unix)
_SYSLOG_TAIL = r" (?P<host>[\w.-]+) [\w./@-]+?(?:\[(?P<pid>\d+)\])?:\s"

# How deep in a line's wrapping a prefix sits: a collector's, a launcher's label, the program's
# logger header, NCCL's own prefix; a timestamp at any depth above the logger's. Only NCCL's
# prefix may follow a logger's header: anything else there is another writer's.
_STAMP_DEPTH, _COLLECTOR, _LAUNCHER, _LOGGER, _NCCL = -1, 0, 1, 2, 3

# Each pattern matches at the start of what is left; they are tried until none matches, so
# stacked prefixes (`[pod/a/b] [1,3]<stderr>:[rank3]:[W1122 ...] host:12:34 [0] NCCL WARN`)
# peel in turn. Groups: rank, host, pid, ts (a time), via (the collector's name for where the
# line came from: a Ray worker's address, a pod, a compose service), src (NCCL's source file).
_PATTERNS = [
    # Open MPI --tag-output: "[jobid,rank]<stdout>:"; horovodrun (Gloo): "[rank]<stdout>:".
    (_LAUNCHER, r"\[(?:(?P<job>\d+),)?(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:\s?"),
    # torchrun --tee / --local-ranks-filter, and older "[default3]:" labels (its local rank).
    (_LAUNCHER, r"\[rank\s?(?P<rank>\d+)\]:\s?"),
    (_LAUNCHER, r"\[default\s?(?P<rank>\d+)\]:\s?"),
    # Ray's worker prefix (ray/_private/worker.py print_worker_logs): "(Actor pid=N, ip=A) ",
    # without ", ip=" for workers on the driver's node; "(raylet, ip=A) " for the raylet.
    (_COLLECTOR, r"\((?:[^()\s]+ )?pid=(?P<pid>\d+)(?:, ip=(?P<via>[\w.:-]+))?\)\s"),
    (_COLLECTOR, r"\(raylet(?:, ip=(?P<via>[\w.:-]+))?\)\s"),
    # kubectl logs --prefix: "[pod/NAME/CONTAINER] ".
    (_COLLECTOR, r"\[pod/(?P<via>[^/\]\s]+)/[^\]\s]+\]\s"),
    # syslog (RFC 3164, with a priority or not) and journald's short and short-precise formats:
    # "Nov 22 04:08:11[.123456] host prog[123]: "
    (
        _COLLECTOR,
        r"(?:<\d{1,3}>)?(?P<sts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})(?:\.\d+)?" + _SYSLOG_TAIL,
    ),
    # journald short-iso / short-full-iso and short-unix: "<ISO or epoch> host prog[123]: "
    (_COLLECTOR, rf"(?P<ts>{_ISO}|{_EPOCH})" + _SYSLOG_TAIL),
    # syslog RFC 5424: "<34>1 2024-11-22T04:08:11.003Z host app 123 msgid - "
    (
        _COLLECTOR,
        rf"<\d{{1,3}}>1 (?P<ts>{_ISO}) (?P<host>[\w.-]+) \S+ (?:(?P<pid>\d+)|\S+) \S+ "
        r"(?:-|(?:\[[^\]]*\])+)\s",
    ),
    # Timestamps: ISO 8601 alone or in brackets (NCCL_DEBUG_TIMESTAMP_FORMAT, kubectl logs
    # --timestamps, docker logs -t, Python's logging), and epoch seconds (in brackets, or with
    # a fraction: a bare 10-digit number may be a message's).
    (_STAMP_DEPTH, rf"\[?(?P<ts>{_ISO})\]?(?:\s*[:|-])?\s+"),
    (_STAMP_DEPTH, rf"(?=\[|1\d{{9}}\.)\[?(?P<ts>{_EPOCH})\]?(?:\s*[:|-])?\s+"),
    # glog / c10 logging: "[W1122 04:08:11.123456 12345 ProcessGroupNCCL.cpp:1234] "; the number is
    # the process's in torch's Python logging (a .py file), a thread's in glog's. c10's own logger
    # had no time before torch 2.4 (c10/util/Logging.cpp): "[E ProcessGroupNCCL.cpp:542] ".
    # Its level letter is kept: an I or W line's "failed" or "Error:" is no failure.
    (
        _LOGGER,
        r"\[?(?P<lvl>[IWEF])(?:(?P<ts>\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"
        r"(?: +(?:(?P<pid>\d+)(?= [^\]\s]+\.py:)|\d+))?|(?<=\[[IWEF])) [^\]\s]+:\d+\]\s?",
    ),
    # srun -l / pdsh-style numeric task labels: "3: "
    (_LAUNCHER, r"(?P<rank>\d{1,6}): (?=\s*\S)"),
    # docker compose: "name  | " (the service name, padded to the longest one).
    (_COLLECTOR, r"(?P<via>[A-Za-z0-9][\w.-]*)\s+\|\s"),
    # NCCL_DEBUG: "host:pid:tid [cudaDev] " (then an optional "file.cc:123 (func) ", or a net
    # plugin's function in place of the file: aws-ofi-nccl's "register_mr_buffers:647 "). Last:
    # it is left out for lines without "NCCL " (below).
    (
        _NCCL,
        r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
        r"(?:(?P<src>[\w./-]+):\d+(?: \([^)]*\))? )?(?=[NR]CCL )",
    ),
]
_FIELDS = ("rank", "host", "pid", "ts", "via", "src", "lvl")


def _numbered(index: int, pattern: str) -> str:
    """Give the pattern's groups unique names (``rank`` -> ``rank_2``) so all fit in one regex."""
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}_{index}>", pattern)


class _Peel(NamedTuple):
    """What one pattern of the alternation gives: the indexes into Match.groups() of _FIELDS (-1
    where it has none), its depth and which pattern it is."""

    fields: tuple[int, ...]
    depth: int
    pattern: int


def _compile(patterns: list[tuple[int, str]]) -> tuple[re.Pattern[str], dict[int, _Peel]]:
    """One alternation that tries ``patterns`` in order at the start (one C call per peel), and
    what each pattern gives, by the index of its group.

    Each pattern is wrapped in a group of its own, which closes last, so ``lastindex`` names the
    one that matched."""
    alternation = (f"(?P<p{i}>{_numbered(i, p)})" for i, (_, p) in enumerate(patterns))
    regex = re.compile("|".join(alternation))
    peels: dict[int, _Peel] = {}
    for i, (depth, _) in enumerate(patterns):
        index = regex.groupindex
        fields = tuple(index.get(f"{name}_{i}", 0) - 1 for name in _FIELDS)
        peels[index[f"p{i}"]] = _Peel(fields, depth, i)
    return regex, peels


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


# A second writer's prefix inside a message: its line spliced into this one. Only prefixes no
# message holds of itself: a launcher's label, a logger's header, NCCL's and Ray's prefixes (a
# host name is at most 253 characters: the bound keeps a long line's search linear).
_SPLICE = re.compile(
    r"\[(?:rank|default)\s?\d+\]:|\[(?:\d+,)?\d+\]<(?:stdout|stderr|stddiag)>:"
    r"|\[[IWEF](?:\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?: +\d+)?)? [^\]\s]+:\d+\]"
    r"|\((?:[^()\s]+ )?pid=\d+(?:, ip=[\w.:-]+)?\)\s"
)
_SPLICED_NCCL = re.compile(
    r"[^\s:\[\]]{1,253}:\d+:\d+ \[\d+\] (?:[\w./-]+:\d+(?: \([^)]*\))? )?[NR]CCL "
)


def splice_at(message: str) -> int:
    """Where a second writer's line starts in ``message`` (a peeled line's rest), or -1: what
    comes before it is the first writer's, cut short wherever the second began."""
    m = _SPLICE.search(message)
    at = -1 if m is None else m.start()
    if "CCL " in message and (n := _SPLICED_NCCL.search(message)) is not None:
        at = n.start() if at < 0 else min(at, n.start())
    return at


class Origin(NamedTuple):
    """Who printed a line and when, as far as its wrapping tells."""

    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    time: float | None = None  # seconds since the epoch (UTC when the stamp has no zone)
    via: str | None = None  # the collector's name for the source: a Ray worker's ip, a pod
    src: str | None = None  # the source file NCCL's prefix names (transport/net_ib.cc)
    repeat: int = 0  # lines of other workers this one stands for (Ray's de-duplication)
    level: str | None = None  # the logger's level letter (glog, c10: I, W, E, F)

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
    pos, deepest = 0, -1
    labels: dict[int, str] | None = None  # the rank each launcher's label named
    for _ in range(_MAX_PEELS):
        if m is None or m.end() == pos:
            break
        at, depth, pattern = fields[m.lastindex or 0]
        groups = m.groups()
        if deepest >= _LOGGER and depth <= deepest:
            break  # after a logger's header only NCCL's prefix is this writer's
        if depth == _LAUNCHER:
            label = groups[at[0]]
            if labels is None:
                labels = {pattern: label}
            elif labels.setdefault(pattern, label) != label:
                break  # the same launcher's label, another rank: a second writer's line
        if depth > deepest:
            deepest = depth
        for k, index in enumerate(at):
            if index >= 0 and found[k] is None:
                found[k] = groups[index]
        pos = m.end()
        m = regex.match(rest, pos)
    rank, host, pid, ts, via, src, level = found
    return rest[pos:], Origin(
        host,
        int(pid) if pid is not None else None,
        int(rank) if rank is not None else None,
        _epoch(ts) if ts is not None else None,
        via,
        src,
        repeat,
        level,
    )
