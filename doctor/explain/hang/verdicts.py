"""What hang-diagnosis tools print about ranks that did not join a collective, in one place.

NCCL RAS (ras_text.py finds its reports; doctor/facts/hang/ras.py reads them), PyTorch's Flight
Recorder analyzer (frtrace.py), Horovod's stall inspector (horovod.py), and a Flight Recorder
dump file itself (doctor/facts/hang/flight_dump.py, the stacks agent's reader). Lines may be
given as printed or already unwrapped (doctor/core/logline.py); Horovod's ``N: [...]`` lines
keep their rank only as printed.
"""

from __future__ import annotations

from typing import Any

from doctor.explain.hang.absent import Absent
from doctor.explain.hang.frtrace import read_frtrace
from doctor.explain.hang.horovod import read_horovod
from doctor.explain.hang.ras_text import find_ras
from doctor.explain.hang.words import VERDICTS as KEYWORDS
from doctor.facts.hang.flight_dump import read_dump

__all__ = ["KEYWORDS", "Absent", "find_ras", "read_flight_dump", "read_frtrace", "read_horovod"]


def read_flight_dump(data: bytes) -> dict[str, Any] | None:
    """A Flight Recorder dump file's bytes (pickle or JSON, as torch writes them) as plain
    values, trimmed as the stacks agent trims them; None when they are not a dump."""
    try:
        return read_dump(data)
    except ValueError:
        return None
