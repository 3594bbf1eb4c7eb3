"""Peel the prefixes launchers and loggers put before a message, keeping who said it and when."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

# Each pattern matches at the start of what is left; they are tried until none matches, so
# stacked prefixes (`[1,3]<stderr>:[rank3]:[W1122 ...] host:12:34 [0] NCCL WARN`) peel in turn.
_PREFIXES = [
    # Open MPI --tag-output / --timestamp-output: [jobid,rank]<stdout>:
    re.compile(r"\[(?P<job>\d+),(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:\s?"),
    # torchrun --tee / --local-ranks-filter, and older "[default3]:" labels.
    re.compile(r"\[(?:rank|default)\s?(?P<rank>\d+)\]:\s?"),
    # Timestamps: ISO 8601 (alone or in brackets, as NCCL's NCCL_DEBUG_TIMESTAMP_FORMAT prints).
    re.compile(
        r"\[?(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\]?"
        r"(?:\s*[:|-])?\s+"
    ),
    # syslog / journalctl: "Nov 22 04:08:11 host prog[123]: "
    re.compile(
        r"(?P<sts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) (?P<host>[\w.-]+) "
        r"[\w./-]+(?:\[(?P<pid>\d+)\])?:\s"
    ),
    # glog / c10 logging: "[W1122 04:08:11.123456 12345 ProcessGroupNCCL.cpp:1234] "
    re.compile(r"\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?: +(?P<pid>\d+))? [^\]\s]+:\d+\]\s?"),
    # srun -l / pdsh-style numeric task labels: "3: "
    re.compile(r"(?P<rank>\d{1,6}): (?=\S)"),
    # NCCL_DEBUG: "host:pid:tid [cudaDev] " (then an optional "file.cc:123 (func) ").
    re.compile(
        r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
        r"(?:[\w./-]+\.\w+:\d+(?: \([^)]*\))? )?(?=NCCL )"
    ),
]
_MAX_PEELS = 8


@dataclass(frozen=True)
class Origin:
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


def _epoch(stamp: str) -> float | None:
    text = stamp.replace(",", ".").replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return when.timestamp()


def strip_prefixes(line: str) -> tuple[str, Origin]:
    """The message without its launcher/logger prefixes, and the origin those prefixes named."""
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    when: float | None = None
    rest = line.lstrip()
    for _ in range(_MAX_PEELS):
        for rx in _PREFIXES:
            m = rx.match(rest)
            if m is None:
                continue
            groups = m.groupdict()
            if groups.get("rank") is not None and rank is None:
                rank = int(groups["rank"])
            if groups.get("host") and host is None:
                host = groups["host"]
            if groups.get("pid") and pid is None:
                pid = int(groups["pid"])
            if groups.get("ts") and when is None:
                when = _epoch(groups["ts"])
            rest = rest[m.end() :]
            break
        else:
            break
    return rest, Origin(host, pid, rank, when)
