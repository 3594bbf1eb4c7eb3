"""Peel the prefixes launchers and loggers put before a message, keeping who said it and when."""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import NamedTuple

# Each pattern matches at the start of what is left; they are tried until none matches, so
# stacked prefixes (`[1,3]<stderr>:[rank3]:[W1122 ...] host:12:34 [0] NCCL WARN`) peel in turn.
_PATTERNS = [
    # Open MPI --tag-output: "[jobid,rank]<stdout>:"; horovodrun (Gloo): "[rank]<stdout>:".
    r"\[(?:(?P<job>\d+),)?(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:\s?",
    # torchrun --tee / --local-ranks-filter, and older "[default3]:" labels.
    r"\[(?:rank|default)\s?(?P<rank>\d+)\]:\s?",
    # Timestamps: ISO 8601 (alone or in brackets, as NCCL's NCCL_DEBUG_TIMESTAMP_FORMAT prints).
    (
        r"\[?(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\]?"
        r"(?:\s*[:|-])?\s+"
    ),
    # syslog / journalctl: "Nov 22 04:08:11 host prog[123]: "
    (
        r"(?P<sts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) (?P<host>[\w.-]+) "
        r"[\w./-]+(?:\[(?P<pid>\d+)\])?:\s"
    ),
    # glog / c10 logging: "[W1122 04:08:11.123456 12345 ProcessGroupNCCL.cpp:1234] "
    r"\[?[IWEF](?P<ts>\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?)(?: +(?P<pid>\d+))? [^\]\s]+:\d+\]\s?",
    # srun -l / pdsh-style numeric task labels: "3: "
    r"(?P<rank>\d{1,6}): (?=\S)",
    # NCCL_DEBUG: "host:pid:tid [cudaDev] " (then an optional "file.cc:123 (func) "). Last: it
    # is left out for lines without "NCCL " (below).
    (
        r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
        r"(?:[\w./-]+\.\w+:\d+(?: \([^)]*\))? )?(?=NCCL )"
    ),
]


def _numbered(index: int, pattern: str) -> str:
    """Give the pattern's groups unique names (``rank`` -> ``rank_2``) so all fit in one regex."""
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}_{index}>", pattern)


def _compile(patterns: list[str]) -> tuple[re.Pattern[str], dict[int, tuple[int, int, int, int]]]:
    """One alternation that tries ``patterns`` in order at the start (one C call per peel), and
    where each pattern keeps the fields an origin takes.

    Each pattern is wrapped in a group of its own, which closes last, so ``lastindex`` names the
    one that matched; the fields are indexes into Match.groups() of (rank, host, pid, ts), -1
    where the pattern has none."""
    regex = re.compile("|".join(f"(?P<p{i}>{_numbered(i, p)})" for i, p in enumerate(patterns)))
    fields: dict[int, tuple[int, int, int, int]] = {}
    for i in range(len(patterns)):
        rank, host, pid, ts = (
            regex.groupindex.get(f"{name}_{i}", 0) - 1 for name in ("rank", "host", "pid", "ts")
        )
        fields[regex.groupindex[f"p{i}"]] = (rank, host, pid, ts)
    return regex, fields


# NCCL's own prefix can start with any hostname, so trying it costs a scan of the first word at
# every peel; lines without "NCCL " (most) use the alternation without it.
_PREFIX = _compile(_PATTERNS)
_PREFIX_NOT_NCCL = _compile(_PATTERNS[:-1])
_MAX_PEELS = 8


class Origin(NamedTuple):
    """Who printed a line and when, as far as its prefixes tell."""

    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    time: float | None = None  # seconds since the epoch (UTC when the stamp has no zone)

    def label(self) -> str:
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.host:
            parts.append(f"{self.host}" + (f" pid {self.pid}" if self.pid else ""))
        return ", ".join(parts)


_STAMP = re.compile(
    r"(?:(?P<y>\d{4})-)?(?P<mo>\d{2})-?(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<f>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)


@functools.lru_cache(maxsize=4096)
def _epoch(stamp: str) -> float | None:
    """Seconds since the epoch; a year-less glog stamp (``1122 04:08:11``) is taken as this year.

    Cached: a busy log repeats its stamps (many lines in one second, or one microsecond)."""
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


_NOWHERE = Origin()


def strip_prefixes(line: str) -> tuple[str, Origin]:
    """The message without its launcher/logger prefixes, and the origin those prefixes named."""
    rest = line.lstrip()
    regex, fields = _PREFIX if "NCCL " in rest else _PREFIX_NOT_NCCL
    m = regex.match(rest)
    if m is None:  # most messages of tracebacks and plain programs: nothing to peel
        return rest, _NOWHERE
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    when: float | None = None
    pos = 0
    for _ in range(_MAX_PEELS):
        if m is None or m.end() == pos:
            break
        groups = m.groups()
        r, h, p, t = fields[m.lastindex or 0]
        if r >= 0 and rank is None and groups[r] is not None:
            rank = int(groups[r])
        if h >= 0 and host is None:
            host = groups[h]
        if p >= 0 and pid is None and groups[p] is not None:
            pid = int(groups[p])
        if t >= 0 and when is None and groups[t] is not None:
            when = _epoch(groups[t])
        pos = m.end()
        m = regex.match(rest, pos)
    return rest[pos:], Origin(host, pid, rank, when)
