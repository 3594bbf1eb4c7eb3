"""What nccl-tests and rccl-tests print before their results: the versions and who runs where.

nccl-tests (src/util.cu writeDeviceReport, 2.13+): "# nccl-tests version %s nccl-headers=%d
nccl-library=%d" (NCCL_VERSION_CODE and ncclGetVersion), then per rank "#  Rank %2d Group %2d Pid
%6d on %10s device %2d [%04x:%02x:%02x] %s"; before 2.13 the rank lines alone, with "[0x%02x]".
rccl-tests (src/common.cu): "rccl-tests: Version %s" (its git hash) and "#   Rank %2d Pid %6d on
%10s device %2d [%s] %s" (a full PCI address); RCCL then prints its own banner ("RCCL version :",
"HIP version  :", "ROCm version :"), which lines.py reads.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from doctor.facts.nccl.names import decode_version

HEADER = re.compile(
    r"^# nccl-tests version (?P<tests>\S+) nccl-headers=(?P<headers>\d+) "
    r"nccl-library=(?P<library>\d+)"
)
RCCL_HEADER = re.compile(r"^rccl-tests: Version (?P<tests>\S+)")
DEVICE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<dev>\d+)\s+\[(?P<bus>[0-9a-fA-Fx:.]+)\]\s+(?P<name>.+?)\s*$"
)


class Device(NamedTuple):
    """One rank of a test run: its process, host, GPU and that GPU's PCI address as NCCL's
    "busId" prints it (0000:1b:00.0 → 1b000), where the line gives the whole address."""

    rank: int
    pid: int
    host: str
    cuda_dev: int
    bus_id: str | None
    gpu: str


def header(line: str) -> tuple[str, str | None] | None:
    """("nccl-tests 2.19.6", the NCCL library's version) or ("rccl-tests <hash>", None)."""
    if (m := HEADER.match(line)) is not None:
        return f"nccl-tests {m['tests']}", decode_version(int(m["library"]))
    if (r := RCCL_HEADER.match(line)) is not None:
        return f"rccl-tests {r['tests']}", None
    return None


def device(line: str) -> Device | None:
    m = DEVICE.match(line)
    if m is None:
        return None
    bus = m["bus"]
    digits = None
    if re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?", bus):
        digits = bus.replace(":", "").replace(".", "") + ("" if "." in bus else "0")
    bus_id = f"{int(digits, 16):x}" if digits else None
    return Device(int(m["rank"]), int(m["pid"]), m["host"], int(m["dev"]), bus_id, m["name"])
