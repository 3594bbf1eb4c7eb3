"""A pasted NCCL_DEBUG=INFO log: kept whole for doctor/facts/nccl/libraries.py, which reads it with
the explain engine's NCCL log reader (doctor/facts/nccl/log.py): version, CUDA, interfaces,
transports. A job's log is one output however its program's prints split it (Kind.whole)."""

from __future__ import annotations

import re
from typing import Any

from doctor.facts.nccl.libraries import LOG_SLOT
from doctor.facts.nccl.world import world_size
from doctor.paste.kind import Kind

# A job's launch, as a prompt or bash -x ("+ ") echoes it: what follows is the job's log.
LAUNCH = (
    r"(?:\w+=\S* )*(?:sudo )?(?:\S*/)?(?:torchrun|srun|mpirun|mpiexec|deepspeed|horovodrun"
    r"|accelerate launch|python3? -m torch\.distributed\.(?:run|launch))\b"
)
# A logger line, or the bare version line NCCL before 2.9 prints once before any of them (and
# RCCL's banner), or the header nccl-tests and rccl-tests print first: a paste whose version line
# follows other output still opens there. A launcher's or framework's count of ranks
# (doctor/facts/nccl/world.py) opens the job's log too: it comes before NCCL's first line.
_OPENS = re.compile(
    r"\b[NR]CCL (?:INFO|WARN|ATTN|TRACE|DIAG) |\b[NR]CCL version :? ?\d+\.\d+\.\d+"
    r"|^# nccl-tests version |^rccl-tests: Version |^\++ " + LAUNCH
)


def _opens(line: str) -> bool:
    return _OPENS.search(line) is not None or world_size(line) is not None


def parse(text: str) -> dict[str, Any]:
    return {"values": {LOG_SLOT: {"value": text}}}


NCCL_KINDS = [Kind("nccl log", _opens, parse, hash_lines=True, whole=True, command=LAUNCH)]
DESCRIPTIONS = {
    "nccl log": "an NCCL_DEBUG=INFO log, or nccl-tests' / rccl-tests' output: NCCL (RCCL), CUDA "
    "(HIP, ROCm) versions, interfaces and transports used, each rank's host and GPU, the job's "
    "rank count (NCCL's, else its launcher's or framework's)",
}
