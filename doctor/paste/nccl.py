"""A pasted NCCL_DEBUG=INFO log: kept whole for doctor/facts/nccl/libraries.py, which reads it with
the explain engine's NCCL log reader (doctor/explain/nccl_log.py): version, CUDA, interfaces,
transports."""

from __future__ import annotations

import re
from typing import Any

from doctor.facts.nccl.libraries import LOG_SLOT
from doctor.paste.kind import Kind

# A logger line, or the bare version line NCCL before 2.9 prints once before any of them (and
# RCCL's banner), or the header nccl-tests and rccl-tests print first: a paste whose version line
# follows other output still opens there.
_OPENS = re.compile(
    r"\bNCCL (?:INFO|WARN|ATTN|TRACE) |\b[NR]CCL version :? ?\d+\.\d+\.\d+"
    r"|^# nccl-tests version |^rccl-tests: Version "
)


def parse(text: str) -> dict[str, Any]:
    return {"values": {LOG_SLOT: {"value": text}}}


NCCL_KINDS = [
    Kind("nccl log", lambda line: _OPENS.search(line) is not None, parse, hash_lines=True)
]
DESCRIPTIONS = {
    "nccl log": "an NCCL_DEBUG=INFO log, or nccl-tests' / rccl-tests' output: NCCL (RCCL), CUDA "
    "(HIP, ROCm) versions, interfaces and transports used, each rank's host and GPU",
}
