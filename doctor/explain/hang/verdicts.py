"""What hang-diagnosis tools print about ranks that did not join a collective, in one place.

NCCL RAS (ras_text.py finds its reports; doctor/facts/hang/ras.py reads them), PyTorch's Flight
Recorder analyzer (frtrace.py), Horovod's stall inspector (horovod.py), and a Flight Recorder
dump file itself (doctor/facts/hang/flight_dump.py, the stacks agent's reader). Lines may be
given as printed or already unwrapped (doctor/explain/prefix.py); Horovod's ``N: [...]`` lines
keep their rank only as printed.
"""

from __future__ import annotations

from typing import Any

from doctor.explain.hang.absent import Absent
from doctor.explain.hang.frtrace import KEYWORDS as FRTRACE_KEYWORDS
from doctor.explain.hang.frtrace import read_frtrace
from doctor.explain.hang.horovod import KEYWORDS as HOROVOD_KEYWORDS
from doctor.explain.hang.horovod import read_horovod
from doctor.explain.hang.ras_text import KEYWORDS as RAS_KEYWORDS
from doctor.explain.hang.ras_text import find_ras
from doctor.facts.hang.flight_dump import read_dump

__all__ = ["KEYWORDS", "Absent", "find_ras", "read_flight_dump", "read_frtrace", "read_horovod"]

# Literal substrings one of which every text these readers accept holds (a caller's pre-filter).
KEYWORDS: tuple[str, ...] = (*RAS_KEYWORDS, *FRTRACE_KEYWORDS, *HOROVOD_KEYWORDS)


def read_flight_dump(data: bytes) -> dict[str, Any] | None:
    """A Flight Recorder dump file's bytes (pickle or JSON, as torch writes them) as plain
    values, trimmed as the stacks agent trims them; None when they are not a dump."""
    try:
        return read_dump(data)
    except ValueError:
        return None
