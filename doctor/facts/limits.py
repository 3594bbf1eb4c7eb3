"""Resource limits that collectives trip over: /dev/shm, locked memory, open files, stack."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing

# getrlimit() reports RLIM_INFINITY as -1 to Python on Linux, on every node.
UNLIMITED = -1


@dataclass(frozen=True)
class Rlimit:
    soft: int  # -1 (RLIM_INFINITY) means unlimited
    hard: int

    @property
    def unlimited(self) -> bool:
        return self.soft == UNLIMITED


@dataclass(frozen=True)
class LimitFacts:
    shm_size: int | Missing
    shm_free: int | Missing
    memlock: Rlimit | Missing
    nofile: Rlimit | Missing
    stack: Rlimit | Missing


def _rlimit(cap: Capture, name: str) -> Rlimit | Missing:
    value = cap.value(f"rlimit:{name}")
    if isinstance(value, Missing):
        return value
    return Rlimit(int(value[0]), int(value[1]))


def parse_limits(cap: Capture) -> LimitFacts:
    shm = cap.value("statvfs:/dev/shm")
    return LimitFacts(
        shm_size=shm if isinstance(shm, Missing) else int(shm["size"]),
        shm_free=shm if isinstance(shm, Missing) else int(shm["free"]),
        memlock=_rlimit(cap, "RLIMIT_MEMLOCK"),
        nofile=_rlimit(cap, "RLIMIT_NOFILE"),
        stack=_rlimit(cap, "RLIMIT_STACK"),
    )
