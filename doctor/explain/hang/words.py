"""The literal words one of which every text the tools' readers accept holds (a caller's
pre-filter): NCCL RAS's report (ras_text.py), torchfrtrace's verdicts (frtrace.py), Horovod's
stall inspector (horovod.py); and the launchers' word on a rank killed or crashed (exits.py),
read from the lines around these words alone. Kept apart from the readers so that a log holding
none of them does not import them."""

from __future__ import annotations

RAS = ("compiled with CUDA", "managed by process", "Missing communicator data",
       "operation counts", '"nccl_version"')  # fmt: skip
FRTRACE = ("joining collective", "has errors", "at entry", "errors for group", "FR dumps",
           "Missing dump files")  # fmt: skip
HOROVOD = ("remainder of ranks", "Missing ranks:", "Stalled ranks:", "Stalled ops:",
           "[missing ranks:", "[ready ranks:")  # fmt: skip
EXITS = ("first observed failure", "noticed that process rank", "srun: error:")
VERDICTS: tuple[str, ...] = (*RAS, *FRTRACE, *HOROVOD)
