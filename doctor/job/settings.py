"""The options of the commands that look at a running job (`doctor stacks`, and `doctor run`'s
hang watch), declared beside the job's code and kept light: the command line imports this module
at start-up, the job's machinery only when a command runs."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from doctor.core.flag import flag

if TYPE_CHECKING:
    from doctor.stages.stacks import Look


@dataclass(frozen=True)
class StacksSettings:
    """What `doctor stacks` looks at, and how (its own options)."""

    pids: Annotated[
        list[int] | None,
        flag("--pid", help="Look at this process (and its children) on every node; repeatable."),
    ] = None
    match: Annotated[
        str | None,
        flag("--match", help="Look at the processes whose command line matches this regex."),
    ] = None
    native: Annotated[
        bool, flag("--native", help="Native frames too (C++, CUDA): about 1 s per process.")
    ] = False
    window: Annotated[
        float,
        flag(
            "--window",
            min=0.0,
            help="Seconds to watch each rank for progress (bytes moved, a stack that moved).",
        ),
    ] = 0.0
    links: Annotated[
        bool,
        flag(
            "--links/--no-links",
            help="When every rank waits in one collective, test TCP among the job's nodes.",
        ),
    ] = True
    deadline: Annotated[
        float, flag("--deadline", min=2.0, help="Seconds each node gets to answer.")
    ] = 10.0

    def look(self, job: str = "") -> Look:
        from doctor.stages.stacks import Look

        twice = self.window > 0
        return Look(
            pids=tuple(self.pids or ()),
            match=self.match or "",
            job=job,
            native=self.native,
            window=self.window,
            twice=twice,
            deadline=max(self.deadline, self.window + 2.0),
        )


class OnHang(str, enum.Enum):
    report = "report"
    stop = "stop"


# A training step rarely prints nothing for five minutes; NCCL's own watchdog ends a collective
# after ten (torch's default for NCCL), so the verdict comes before the job is killed for it.
HANG_AFTER = 300.0


@dataclass(frozen=True)
class HangSettings:
    """`doctor run`'s hang watch (its own options)."""

    hang_after: Annotated[
        float,
        flag(
            "--hang-after",
            min=0.0,
            help="Seconds without output after which every rank is looked at (0: never).",
        ),
    ] = HANG_AFTER
    on_hang: Annotated[
        OnHang,
        flag("--on-hang", help="A hung job: report it and leave it running, or stop it."),
    ] = OnHang.report
