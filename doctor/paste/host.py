"""Pasted host outputs → the slots the probe fills: the kernel log (dmesg in its forms, journalctl
-k, /var/log/kern.log and syslog), `df` (-h, -k, -P, -T, -i), `free`, /proc/meminfo, `swapon
--show` and /proc/swaps, `sensors`, `mount` and `findmnt`.

A kernel log lands where the probe puts the one it read (doctor/facts/kernel/log.py), so every
kernel check (and gpu.xid) reads it; the others in command slots doctor/facts/host/host.py reads.
Nothing is parsed here beyond recognising where each output begins.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from doctor.facts.host.host import DF, FREE, MOUNTS, SENSORS, SWAPS
from doctor.facts.kernel.events import HAS_WORD
from doctor.facts.kernel.log import SLOT
from doctor.paste.kind import Kind, command, matcher

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
# A line in a kernel log's coat: dmesg's stamps (plain, -d, -T, -H, -r, -x: seconds since boot,
# never the ten digits of a Unix time), a journal or syslog line of the kernel's, dmesg
# --time-format iso's comma.
_KERNEL_LINE = re.compile(
    r"^\s*(?:<\d{1,3}>)?(?:[a-z]{2,8}\s*:[a-z]{3,6}\s*:\s*)?\[\s*(?:\+?\d{1,9}\.\d+|"
    rf"{_DAY}\s+{_MONTH}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d\s+\d{{4}}|{_MONTH}\d{{1,2}}\s+\d\d:\d\d)\]"
    rf"|^\s*(?:{_MONTH}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d(?:\.\d+)?|\d{{4}}-\d\d-\d\dT\S+)\s+\S+\s+kernel:"
    r"|^\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:?\d\d\s"
)
# A line from a grep of the log, without its coat: one that names a driver's report.
_BARE = re.compile(
    r"^\s*(?:NVRM: Xid|nvidia-nvswitch\d+: SXid|(?:NMI )?watchdog: |INFO: task |"
    r"(?:Memory cgroup )?[Oo]ut of memory: |Kernel panic - not syncing|mlx5_core |efa |"
    r"EDAC |mce: |pcieport |nfs: server |NFS: )"
)


def _crc(text: str) -> str:
    return f"{zlib.crc32(text.encode()):08x}"


def _kernel(text: str) -> dict[str, Any]:
    return {"values": {f"{SLOT}:{_crc(text)}": {"value": {"source": "pasted", "text": text}}}}


def _is_kernel(line: str) -> bool:
    if _KERNEL_LINE.match(line):
        return True
    return _BARE.match(line) is not None and HAS_WORD.search(line) is not None


def _slot(slot: str, argv: list[str], note: str) -> Any:
    def parse(text: str) -> dict[str, Any]:
        return {"commands": {f"{slot}:{_crc(text)}": command(argv, text, note)}}

    return parse


HOST_KINDS: list[Kind] = [
    Kind("dmesg", _is_kernel, _kernel),
    Kind(
        "df",
        matcher(r"\s*Filesystem\s+(?:Type\s+)?(?:Size|\d+[KMG]?-blocks|Inodes)\b"),
        _slot(DF, ["df"], "pasted df"),
    ),
    # (Its header is indented; a paste may lose the margin: unindent.)
    Kind("free", matcher(r"\s*total\s+used\s+free\s+"), _slot(FREE, ["free"], "pasted free")),
    Kind(
        "/proc/meminfo",
        matcher(r"MemTotal:\s+\d+\s+kB"),
        lambda text: {"files": {"/proc/meminfo": {"text": text}}},
    ),
    Kind(
        "swap",
        matcher(r"NAME\s+TYPE\s+SIZE\s+USED\s+PRIO", r"Filename\s+Type\s+Size\s+Used\s+Priority"),
        _slot(SWAPS, ["swapon", "--show"], "pasted swapon or /proc/swaps"),
    ),
    Kind(
        "sensors",
        matcher(
            r"[\w.]+-(?:isa|pci|virtual|acpi|i2c|platform|spi|hid|mdio|scsi|sdio|usb)-[0-9a-f]+\s*$",
            r"Adapter: ",
        ),
        _slot(SENSORS, ["sensors"], "pasted sensors"),
    ),
    Kind(
        "mount",
        matcher(r"\S+ on /\S* type \S+ \(", r"TARGET\s+SOURCE\s+FSTYPE\s+OPTIONS"),
        _slot(MOUNTS, ["mount"], "pasted mount or findmnt"),
    ),
]

DESCRIPTIONS = {
    "dmesg": "the kernel log: dmesg (plain, -T, -H, -x, -r, --time-format iso), journalctl -k, "
    "/var/log/kern.log, syslog, or lines grepped from them: Xid, SXid, lockups, hung tasks, "
    "panics, OOM kills, mlx5/efa errors, machine checks, EDAC, PCIe AER, NFS",
    "df": "`df` (-h, -k, -P, -T, -m) and `df -i`: free space and inodes per mount",
    "free": "`free` (-h, -m, -g, plain, old and new procps): memory available, swap",
    "/proc/meminfo": "MemTotal, MemAvailable, swap",
    "swap": "`swapon --show` or /proc/swaps: the swap areas",
    "sensors": "lm-sensors `sensors` (°C or -f): temperatures against their high and crit limits",
    "mount": "`mount` or `findmnt`: the mount table (which paths are NFS, FUSE, read-only)",
}
