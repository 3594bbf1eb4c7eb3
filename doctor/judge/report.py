"""The Report: one object holding everything a run found. Renderers read only this."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor import __version__
from doctor.core.errors import EXIT_FINDINGS, EXIT_OK
from doctor.core.jsonable import SCHEMA_VERSION, jsonable
from doctor.core.model import CheckOutcome, Finding, Severity, Status
from doctor.facts.allreduce import AllreduceFacts
from doctor.facts.cluster import ClusterFacts


@dataclass(frozen=True)
class NodeVerdict:
    """One node's own verdict: the worst finding that names it (a node the probe could not reach
    fails, named or not), and the codes of the findings that name it, worst first. A finding
    that names no node (cluster-wide) counts for none of them."""

    worst: Severity | None
    codes: tuple[str, ...]

    @property
    def word(self) -> str:
        return "pass" if self.worst in (None, Severity.INFO) else str(self.worst)

    @property
    def failed(self) -> bool:
        return self.worst is Severity.FAIL


@dataclass
class Report:
    command: str
    cluster: ClusterFacts
    outcomes: list[CheckOutcome]
    findings: list[Finding] = field(default_factory=list)
    # Results of stages beyond the checks (nics, ssh_mesh, reachability, allreduce, ...),
    # each already a JSON-ready value, keyed by its top-level name in the JSON report.
    sections: dict[str, Any] = field(default_factory=dict)
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    @classmethod
    def build(
        cls,
        command: str,
        cluster: ClusterFacts,
        outcomes: list[CheckOutcome],
        sections: dict[str, Any] | None = None,
    ) -> Report:
        return cls(command, cluster, outcomes, merge_findings(outcomes), sections or {})

    @property
    def interrupted(self) -> bool:
        """Ctrl-C stopped the allreduce: its report is written, then the run exits 130."""
        return (
            isinstance(self.cluster.allreduce, AllreduceFacts)
            and self.cluster.allreduce.interrupted
        )

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def exit_code(self, fail_on: Severity = Severity.FAIL) -> int:
        worst = self.worst()
        crashed = any(o.status is Status.CRASH for o in self.outcomes)
        if crashed or (worst is not None and worst >= fail_on):
            return EXIT_FINDINGS
        return EXIT_OK

    def node_verdicts(self) -> dict[str, NodeVerdict]:
        """Every node's own verdict, in inventory order."""
        named: dict[str, list[Finding]] = {name: [] for name in self.cluster.names}
        for f in self.findings:  # worst first
            for node in dict.fromkeys(f.nodes):
                if node in named:
                    named[node].append(f)
        verdicts = {}
        for name, found in named.items():
            codes = [f.code for f in found]
            worst = max((f.severity for f in found), default=None)
            failure = self.cluster.failures.get(name)
            if failure is not None:  # unreachable, even where its check was not selected
                worst = Severity.FAIL
                codes = [failure.code, *codes]
            verdicts[name] = NodeVerdict(worst, tuple(dict.fromkeys(codes)))
        return verdicts

    def to_json(self) -> dict[str, Any]:
        nodes: dict[str, Any] = {}
        for name, verdict in self.node_verdicts().items():
            if name in self.cluster.nodes:
                nodes[name] = {"status": "ok", "facts": self.cluster.nodes[name].to_json()}
            elif name in self.cluster.failures:
                nodes[name] = {"status": "failed", "failure": jsonable(self.cluster.failures[name])}
            else:  # answered a stage but was not probed (doctor stacks)
                nodes[name] = {"status": "ok"}
            nodes[name].update(verdict=verdict.word, codes=list(verdict.codes))
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "cluster-doctor", "version": __version__},
            "command": self.command,
            "created": self.created,
            "nodes": nodes,
            "outcomes": [jsonable(o) for o in self.outcomes],
            "findings": [jsonable(f) for f in self.findings],
            "summary": self.summary(),
        }
        if self.cluster.baseline is not None:
            base = self.cluster.baseline
            doc["baseline"] = {"node": base.node, "facts": base.to_json()}
        doc.update(self.sections)
        return doc

    def summary(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for o in self.outcomes:
            counts[o.status.value] += 1
        counts["nodes"] = len(self.cluster.names)
        counts["nodes_failed"] = len(self.cluster.failures)
        return counts


def merge_findings(outcomes: Iterable[CheckOutcome]) -> list[Finding]:
    """One finding per distinct (check, code, severity, summary), naming every node it hit.

    Node checks emit the same finding on many nodes; the report names them once as a group.
    Ordered worst first, then by check and code, so the report reads top-down by urgency.
    """
    merged: dict[tuple[str, str, int, str], Finding] = {}
    for outcome in outcomes:
        for f in outcome.findings:
            key = (f.check, f.code, int(f.severity), f.summary)
            if key in merged:
                prev = merged[key]
                nodes = prev.nodes + tuple(n for n in f.nodes if n not in prev.nodes)
                evidence = prev.evidence + tuple(e for e in f.evidence if e not in prev.evidence)
                merged[key] = dataclasses.replace(prev, nodes=nodes, evidence=evidence)
            else:
                merged[key] = f
    return sorted(merged.values(), key=lambda f: (-int(f.severity), f.check, f.code))
