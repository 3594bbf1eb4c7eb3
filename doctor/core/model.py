"""Core value types shared by every stage: facts that may be missing, findings, outcomes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from doctor.core.shell import Command

T = TypeVar("T")

MissingKind = Literal["absent", "unreadable", "failed", "timeout", "unsupported"]


@dataclass(frozen=True)
class Missing:
    """A fact that could not be had, and why.

    ``kind`` keeps absent (the file is not there), unreadable (permission denied), failed (the
    command ran and failed, or its output made no sense), timeout and unsupported apart, because
    they lead to different advice: a missing driver is not a driver we were not allowed to read.
    """

    reason: str
    kind: MissingKind = "absent"

    def __bool__(self) -> bool:  # a Missing is never a usable value
        return False


def present(value: T | Missing) -> T | None:
    """The value, or None when it is Missing."""
    return None if isinstance(value, Missing) else value


@dataclass(frozen=True)
class NodeFailure:
    """A node whose facts could not be had: unreachable, no Python, probe broke, ..."""

    node: str
    code: str  # e.g. "transport.refused", "probe.no_python"
    summary: str
    detail: str = ""


class Severity(enum.IntEnum):
    INFO = 10
    WARN = 20
    FAIL = 30

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected info, warn or fail)") from None


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    CRASH = "crash"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Fix:
    """What to do about a finding: a sentence, and commands or flags that can be pasted, each
    built by doctor/core/shell.py (its values quoted)."""

    text: str
    commands: tuple[Command, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One problem (or notable fact) a check found.

    ``code`` is stable and greppable (``nccl.iface.link_local_only``); ``summary`` is one line;
    ``evidence`` says what was seen and where; ``nodes`` names every node it applies to (a node
    check may leave it empty: the runner fills in the node it ran on).
    """

    code: str
    severity: Severity
    summary: str
    nodes: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    fix: Fix | None = None
    data: dict[str, Any] = field(default_factory=dict)
    check: str = ""  # filled in by the runner from the check that produced it


@dataclass(frozen=True)
class CheckOutcome:
    """How one check went, on one node (``node``) or cluster-wide (``node`` is None)."""

    check: str
    status: Status
    node: str | None = None
    findings: tuple[Finding, ...] = ()
    reason: str = ""  # why it was skipped, or the crash message
    seconds: float = 0.0
    title: str = ""


def status_of(findings: tuple[Finding, ...] | list[Finding]) -> Status:
    """The status a set of findings gives a check: the worst severity wins; info passes."""
    worst = max((f.severity for f in findings), default=Severity.INFO)
    if worst >= Severity.FAIL:
        return Status.FAIL
    if worst >= Severity.WARN:
        return Status.WARN
    return Status.PASS
