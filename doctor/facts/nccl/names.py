"""How NCCL and the doctor's NCCL log summary name things, shared by the log readers
(doctor/explain/) and what `doctor collect` loads (doctor/facts/nccl/libraries.py,
checks/nccl_log.py), which must not import a log reader to get them (tests/core/test_startup.py)."""

from __future__ import annotations

# The log summary's name for the processes whose lines named no host: a group, not a node (a
# log pasted for one node whose lines name none is that node: facts/cluster.py maps it).
UNKNOWN_HOST = "?"


def decode_version(code: int) -> str:
    """NCCL_VERSION_CODE → "2.32.3" (codes below 10000 are the pre-2.9 X*1000+Y*100+Z form)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
