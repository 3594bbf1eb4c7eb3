"""Run checks over facts. A check that raises is a ``crash`` outcome, never a crash of the tool."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping

from doctor.core.model import CheckOutcome, Finding, Missing, Status, status_of
from doctor.core.nodeset import name_peers
from doctor.facts.cluster import ClusterFacts
from doctor.plugin import CheckSpec, Skip


def _run_one(
    spec: CheckSpec, subject: object, node: str | None, owners: Mapping[str, str]
) -> CheckOutcome:
    started = time.perf_counter()

    def outcome(
        status: Status, findings: tuple[Finding, ...] = (), reason: str = ""
    ) -> CheckOutcome:
        seconds = round(time.perf_counter() - started, 6)
        return CheckOutcome(spec.id, status, node, findings, reason, seconds, spec.title)

    for area in spec.needs:
        value = getattr(subject, area, None)
        if isinstance(value, Missing):
            return outcome(Status.SKIP, reason=f"{area}: {value.reason}")
    try:
        produced = list(spec.fn(subject))
    except Skip as skip:
        return outcome(Status.SKIP, reason=skip.reason)
    except Exception as exc:
        return outcome(Status.CRASH, reason=f"{type(exc).__name__}: {exc}")
    findings = []
    for f in produced:
        if f.code not in spec.codes:
            return outcome(Status.CRASH, reason=f"emitted undeclared finding code {f.code!r}")
        nodes = f.nodes or ((node,) if node else ())
        fix = f.fix or spec.fixes.get(f.code)
        # A peer named by address is named by node too, where one node holds the address.
        summary = name_peers(f.summary, owners, nodes)
        findings.append(
            dataclasses.replace(f, check=spec.id, nodes=nodes, fix=fix, summary=summary)
        )
    return outcome(status_of(findings), tuple(findings))


def run_checks(specs: Iterable[CheckSpec], cluster: ClusterFacts) -> list[CheckOutcome]:
    """Node checks run once per reachable node, cluster checks once; order follows ``specs``."""
    outcomes: list[CheckOutcome] = []
    owners = cluster.address_owners
    for spec in specs:
        if spec.scope == "node":
            nodes = cluster.nodes.items()
            outcomes.extend(_run_one(spec, facts, name, owners) for name, facts in nodes)
        else:
            outcomes.append(_run_one(spec, cluster, None, owners))
    return outcomes
