"""How a job the doctor launched ended (doctor run): which nodes failed and with what, what their
output shows (the explain engine's findings, the hang its text shows), whether the time limit or
the hang watch ended it. checks/job.py judges it, so the job's end is a finding in the report
like any other, counted in its summary: a CI job reading the report sees the job fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FailedNode:
    node: str
    exit_code: int | None
    error: str | None  # the exception its traceback ended with, where it printed one


@dataclass(frozen=True)
class JobOutcome:
    exit_code: int
    failed: tuple[FailedNode, ...] = ()
    # The known failures in the nodes' output (doctor explain's findings, as JSON), cause first.
    causes: tuple[dict[str, Any], ...] = ()
    # The nodes those failures name as the cause (doctor/job/explain.py culprits): never one
    # that only reported a failure elsewhere.
    culprits: tuple[str, ...] = ()
    timed_out: bool = False
    hung: bool = False  # ended by the hang watch (--on-hang stop)
    interrupted: bool = False
    nodes: tuple[str, ...] = field(default=())  # where it ran
