"""The gate: what the preflight found, less what the recommended environment fixes.

The environment applied is each node's NIC recommendation (doctor/nic/choice.py). A finding is
fixed by it when the checks, run again on the same facts with that environment set on every
node, no longer find it (the NIC replay decides, not a list of codes); the allreduce's findings
are fixed when its run as recommended passed with no setting the job does not get. Everything
else at or above --fail-on stops the launch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from doctor.core.model import Finding, Severity, Status
from doctor.facts.allreduce import AllreduceFacts
from doctor.facts.cluster import ClusterFacts
from doctor.judge.report import Report, merge_findings
from doctor.judge.runner import run_checks
from doctor.nic.choice import NicPlan
from doctor.pipeline.steps import derive
from doctor.plugin import CheckSpec

ALLREDUCE = "allreduce"


@dataclass(frozen=True)
class Verdict:
    env: dict[str, dict[str, str]]  # node -> what to set there
    blocking: list[Finding]
    fixed: list[Finding]
    crashed: list[str]  # checks that crashed: nothing is known, so they stop the launch too
    proven: bool = False  # every node's interface was reached by every peer over TCP
    # --spares: the nodes left out, each with the codes of the findings that named it, and
    # those findings (they no longer stop the launch on the nodes kept).
    left_out: dict[str, tuple[str, ...]] = field(default_factory=dict)
    spared: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.blocking and not self.crashed


def node_env(cluster: ClusterFacts) -> dict[str, dict[str, str]]:
    """Each node's recommended environment (empty where no interface is recommended)."""
    return {
        name: facts.nic.recommendation() if isinstance(facts.nic, NicPlan) else {}
        for name, facts in cluster.nodes.items()
    }


def with_env(cluster: ClusterFacts, env: dict[str, dict[str, str]]) -> ClusterFacts:
    """The same facts as if ``env`` had been set on each node before the probe."""
    nodes = {
        name: replace(facts, env={**facts.env, **env.get(name, {})})
        if isinstance(facts.env, dict)
        else facts
        for name, facts in cluster.nodes.items()
    }
    return replace(cluster, nodes=derive(nodes, cluster.reachability))


def allreduce_fixed(cluster: ClusterFacts, env: dict[str, dict[str, str]]) -> bool:
    """The allreduce passed as recommended, and the job gets every setting that run had."""
    facts = cluster.allreduce
    if not isinstance(facts, AllreduceFacts) or not facts.recommendation:
        return False
    passed = any(r.label == "as recommended" and r.status == "passed" for r in facts.runs)
    wanted = facts.recommendation.items()
    return passed and all(all(given.get(k) == v for k, v in wanted) for given in env.values())


def judge(report: Report, specs: Iterable[CheckSpec], threshold: Severity) -> Verdict:
    cluster = report.cluster
    env = node_env(cluster)
    at_threshold = [f for f in report.findings if f.severity >= threshold]
    after = run_checks([s for s in specs if s.id != ALLREDUCE], with_env(cluster, env))
    remaining = {f.code for f in merge_findings(after) if f.severity >= threshold}
    fixed_allreduce = allreduce_fixed(cluster, env)

    def fixed(f: Finding) -> bool:
        if f.check == ALLREDUCE:
            return fixed_allreduce
        return any(env.values()) and f.code not in remaining

    crashed = sorted({o.check for o in report.outcomes if o.status is Status.CRASH})
    plans = [f.nic for f in cluster.nodes.values()]
    return Verdict(
        env=env,
        blocking=[f for f in at_threshold if not fixed(f)],
        fixed=[f for f in at_threshold if fixed(f)],
        crashed=crashed,
        proven=bool(plans)
        and all(
            isinstance(p, NicPlan) and p.recommended and p.recommended.name in (p.proven or ())
            for p in plans
        ),
    )
