"""The contract for check plugins: what a check is, how it declares its needs and its codes.

A plugin module ends with ``CHECKS = [...]``, like the built-in modules in ``checks/``, and is
registered under the ``cluster_doctor.checks`` entry-point group. This module is what a plugin
imports: the decorators, ``need`` and ``Skip``, and the findings it yields (``Finding``, ``Fix``,
``Severity``, from doctor/core/model.py) with their commands (``command``, ``commands``,
``over_ssh``: every value quoted, doctor/core/shell.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import Command, command, commands, over_ssh

if TYPE_CHECKING:
    from doctor.facts.cluster import ClusterFacts
    from doctor.facts.node import NodeFacts

__all__ = [
    "CheckSpec",
    "Command",
    "Finding",
    "Fix",
    "Missing",
    "Scope",
    "Severity",
    "Skip",
    "cluster_check",
    "command",
    "commands",
    "need",
    "node_check",
    "over_ssh",
]

T = TypeVar("T")

Scope = Literal["node", "cluster"]


class Skip(Exception):
    """Raised by a check whose facts are not there: its outcome becomes ``skip`` with the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def need(value: T | Missing, what: str = "") -> T:
    """Return the value, or skip the calling check with the reason it is missing."""
    if isinstance(value, Missing):
        prefix = f"{what}: " if what else ""
        raise Skip(prefix + value.reason)
    return value


@dataclass(frozen=True)
class CheckSpec:
    """One check.

    ``codes`` maps every finding code the check can emit to its one-line meaning; the runner
    refuses undeclared codes so that the generated check reference can never miss one.
    ``fixes`` maps a code to its usual fix: the check reference shows it, and the runner gives it
    to a finding of that code that brings no fix of its own.
    ``probe_files`` and ``probe_commands`` let a plugin ask the probe for more raw data (paths to
    read; named argv lists to run) without shipping code to nodes.
    """

    id: str
    title: str
    scope: Scope
    fn: Callable[..., Iterable[Finding]]
    codes: Mapping[str, str]
    needs: tuple[str, ...] = ()
    probe_files: tuple[str, ...] = ()
    probe_commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fixes: Mapping[str, Fix] = field(default_factory=dict)


def _or_empty(fixes: Mapping[str, Fix] | None) -> Mapping[str, Fix]:
    # Not ``fixes or {}``: a lazily filled mapping would be read just to be tested for truth.
    return {} if fixes is None else fixes


def node_check(
    id: str,
    title: str,
    *,
    codes: Mapping[str, str],
    needs: tuple[str, ...] = (),
    probe_files: tuple[str, ...] = (),
    probe_commands: dict[str, tuple[str, ...]] | None = None,
    fixes: Mapping[str, Fix] | None = None,
) -> Callable[[Callable[[NodeFacts], Iterable[Finding]]], CheckSpec]:
    """Declare a check that looks at one node's facts; ``needs`` names NodeFacts fields."""

    def wrap(fn: Callable[[NodeFacts], Iterable[Finding]]) -> CheckSpec:
        return CheckSpec(
            id, title, "node", fn, codes, needs, probe_files, probe_commands or {}, _or_empty(fixes)
        )

    return wrap


def cluster_check(
    id: str,
    title: str,
    *,
    codes: Mapping[str, str],
    needs: tuple[str, ...] = (),
    fixes: Mapping[str, Fix] | None = None,
) -> Callable[[Callable[[ClusterFacts], Iterable[Finding]]], CheckSpec]:
    """Declare a check that compares nodes or looks at cluster-wide stages (mesh, reachability)."""

    def wrap(fn: Callable[[ClusterFacts], Iterable[Finding]]) -> CheckSpec:
        return CheckSpec(id, title, "cluster", fn, codes, needs, fixes=_or_empty(fixes))

    return wrap
