"""A kernel log line as any tool prints it, peeled to the kernel's own text and its time.

The same message reaches us in many coats (util-linux dmesg, systemd's journalctl, rsyslog):

    [ 8811.120931] text                                   dmesg; the probe's /dev/kmsg lines
    [  +0.000123] text, [Nov29 06:30] text                dmesg -d / -H
    [Sun Nov 29 06:30:54 2026] text                       dmesg -T
    2026-11-29T06:30:54,123456+00:00 text                 dmesg --time-format iso
    kern  :err   : [ 12.345678] text                      dmesg -x
    <3>[ 12.345678] text, <3>text                         dmesg -r
    Nov 29 06:30:54 gpu7 kernel: text                     journalctl -k, /var/log/kern.log
    Nov 29 06:30:54 gpu7 kernel: [ 12.345678] text        rsyslog with the kernel's own stamp
    2026-11-29T06:30:54.123456+00:00 gpu7 kernel: text    journalctl -o short-iso, RFC 3339 syslog
    [   12.345678] gpu7 kernel: text                      journalctl -o short-monotonic

A line a syslog prefix gives to a program other than the kernel ("gpu7 containerd[812]: ...")
is no kernel line: its words are a program's, whatever they say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE = 4096  # a kernel line is at most 1 KiB of text (PRINTKRN_RECORD_MAX); pastes wrap

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_CLOCK = rf"{_MONTH}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d(?:\.\d+)?"
# The syslog/journal prefix: a time, a host, a tag ("kernel", "containerd[812]") and ": ".
_SYSLOG = re.compile(
    rf"^(?:<\d{{1,3}}>)?(?P<when>{_CLOCK}|{_ISO}|\[\s*\d+\.\d+\])\s+(?P<host>\S+)\s+"
    r"(?P<tag>[A-Za-z(][\w().@/-]{0,63}?)(?:\[\d+\])?:\s?(?P<rest>.*)$"
)
# dmesg's own prefixes, in any order dmesg combines them: facility:level, raw priority, stamp.
_LEVEL = re.compile(r"^(?:<\d{1,3}>|[a-z]{2,8}\s*:[a-z]{3,6}\s*:\s?)")
_STAMP = re.compile(
    rf"^\[\s*(?:(?P<mono>\d+\.\d+)|\+\d+\.\d+|{_DAY}\s+{_MONTH}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d\s+\d{{4}}"
    rf"|{_MONTH}\d{{1,2}}\s+\d\d:\d\d|<\s*\d+\.\d+>)\]\s?"
)
_ISO_STAMP = re.compile(rf"^{_ISO}\s")


@dataclass(frozen=True)
class KernelLine:
    text: str  # the kernel's message, prefixes peeled
    stamp: float | None  # seconds since boot, where the line says (dmesg's [12.345678])
    host: str | None  # the host a syslog or journal prefix names


def peel(line: str) -> KernelLine | None:
    """The kernel's message in a log line; None for a line a syslog prefix gives to a program."""
    line = line.rstrip("\r\n")[:MAX_LINE].strip()
    host = None
    stamp = None
    m = _SYSLOG.match(line)
    if m and not _looks_like_dmesg_text(m):
        if m.group("tag") != "kernel":
            return None
        host = m.group("host")
        when = m.group("when")
        stamp = _mono(when)
        line = m.group("rest").strip()
    for _ in range(3):  # at most level, priority and stamp, in whatever order
        level = _LEVEL.match(line)
        if level:
            line = line[level.end() :]
            continue
        found = _STAMP.match(line)
        if found:
            if found.group("mono") is not None:
                stamp = float(found.group("mono"))
            line = line[found.end() :]
            continue
        iso = _ISO_STAMP.match(line)
        if iso:
            line = line[iso.end() :]
            continue
        break
    return KernelLine(line.strip(), stamp, host)


def _mono(when: str) -> float | None:
    inner = when.strip("[] ")
    try:
        return float(inner)
    except ValueError:
        return None


def _looks_like_dmesg_text(m: re.Match[str]) -> bool:
    """A dmesg line "[ 12.3] EDAC MC0: 1 CE ..." also fits the journal's shape (a stamp, a
    word, a word and a colon); short-monotonic's "[ 12.3] gpu7 kernel: ..." is a journal line.
    After dmesg's own stamps ("[12.3]", --time-format iso's comma), only "kernel" and a tag
    with a [pid] make a journal line."""
    when = m.group("when")
    if not (when.startswith("[") or "," in when):
        return False
    rest = m.string[m.end("tag") :]
    return m.group("tag") != "kernel" and not rest.startswith("[")
