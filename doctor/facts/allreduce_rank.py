"""One allreduce rank as its worker's lines tell it: the phase it is in, when it got there, what
it measured, and how it ended. doctor/facts/allreduce.py reads a run of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PHASES = (
    "launch",
    "rendezvous",
    "init",
    "first_allreduce",
    "verify",
    "sweep",
    "teardown",
    "done",
)


@dataclass
class RankState:
    rank: int
    node: str
    phase: str = ""  # the last phase entered ("" before its first line)
    entered: float = 0.0  # when it entered that phase (controller clock)
    began: float = 0.0  # when the run started it (controller clock)
    # Seconds from the run's start until it had imported torch (None: it had not): the start.
    ready_s: float | None = None
    error: str = ""
    failed_phase: str = ""
    host: str = ""
    pid: int | None = None
    env: dict[str, str | None] = field(default_factory=dict)
    exit_code: int | None = None
    # Its process or its node went while the run went on (its output ended, or its heartbeats
    # stopped while the others' kept coming), with no exit status to say so.
    gone: bool = False
    verify: dict[str, Any] = field(default_factory=dict)
    sweep: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    sweep_stopped: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""
    # What the worker asked NCCL to say (RAS, diagnostics) and what its version lacks.
    nccl_voice: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.phase == "done"

    @property
    def ready(self) -> bool:
        return self.ready_s is not None

    @property
    def failed(self) -> bool:
        return bool(self.error) or (self.exit_code is not None and not self.done)

    def apply(self, event: dict[str, Any], at: float) -> None:
        """Fold one worker line into the state."""
        kind = event.get("ev")
        if kind == "phase" and event.get("phase") in PHASES:
            self.phase, self.entered = str(event["phase"]), at
            if self.phase == "launch":
                self.host = str(event.get("host", ""))
                self.pid = event.get("pid")
                self.env = dict(event.get("env") or {})
            elif self.phase == "init" and isinstance(event.get("nccl"), dict):
                self.nccl_voice = event["nccl"]
        elif kind == "ready":
            self.ready_s = max(0.0, at - self.began)
        elif kind == "fail":
            self.error = str(event.get("error", "failed"))
            self.failed_phase = str(event.get("phase", self.phase))
        elif kind == "verify":
            self.verify = event
        elif kind == "sweep":
            self.sweep.append(event)
        elif kind == "link":
            self.links.append(event)
        elif kind == "sweep_stopped":
            self.sweep_stopped = event


def reach(r: RankState) -> float:
    """How far a rank got, in PHASES' order. A rank that imported torch is past one still
    importing; rank 0 still setting up its store is behind the ranks waiting to reach it."""
    if not r.phase:
        return -1.0
    at = float(PHASES.index(r.phase))
    if r.phase == "launch" and r.ready:
        at += 0.5
    if r.rank == 0 and r.phase == "rendezvous":
        at -= 0.25
    return at
