"""The end of a job the doctor launched (`doctor run`): a failure, with the cause its output
shows, or the time limit. A hang the watch found is judged by checks/hang.py, on the ranks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from doctor.core.model import Finding, Fix, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import Command
from doctor.facts.hang.outcome import FailedNode
from doctor.plugin import cluster_check, need

if TYPE_CHECKING:  # only a type here: the cluster's facts import every parser
    from doctor.facts.cluster import ClusterFacts

CODES = {
    "job.failed": "the job doctor run launched failed: the cause its nodes' output shows, and the "
    "nodes it names as the culprit (never one that only reported a failure elsewhere)",
    "job.timed_out": "the job ran past --time-limit and was ended on every node",
}


@cluster_check(
    "job",
    "The job doctor run launched: how it ended, and why",
    needs=("job",),
    codes=CODES,
)
def job(cluster: ClusterFacts) -> Iterator[Finding]:
    outcome = need(cluster.job)
    if outcome.timed_out:
        yield Finding(
            "job.timed_out",
            Severity.FAIL,
            f"the job ran past the time limit and was ended on {compact(list(outcome.nodes))}",
            nodes=outcome.nodes,
            fix=Fix("Give it more time (--time-limit), or look at why it ran slow or hung."),
            data={"exit_code": outcome.exit_code},
        )
    if not outcome.failed:
        return
    first = outcome.failed[0]
    error = f": {first.error}" if first.error else ""
    causes = [c for c in outcome.causes if c.get("severity") in ("fail", "warn")]
    cause = f"; cause: {causes[0]['code']}: {causes[0]['summary']}" if causes else ""
    fix = (causes[0].get("fix") or {}) if causes else {}
    yield Finding(
        "job.failed",
        Severity.FAIL,
        f"the job failed on {first.node} (exit {first.exit_code}){error}{cause}"
        + (f"; culprit: {compact(list(outcome.culprits))}" if outcome.culprits else ""),
        nodes=outcome.culprits,
        evidence=tuple(
            [_failed(f) for f in outcome.failed[1:]]
            + [f"{c['code']}: {c['summary']}" for c in causes[1:4]]
        ),
        fix=Fix(
            fix.get("text") or "Read the first failing node's output (doctor run's logs folder).",
            # The catalogue's own commands (the explanation's fix), never text from the logs.
            tuple(Command(c) for c in fix.get("commands") or ()),
        ),
        data={
            "exit_code": outcome.exit_code,
            "failed": [{"node": f.node, "exit_code": f.exit_code} for f in outcome.failed],
            "culprits": list(outcome.culprits),
            "causes": [c["code"] for c in causes],
        },
    )


def _failed(node: FailedNode) -> str:
    return f"{node.node}: exit {node.exit_code}" + (f": {node.error}" if node.error else "")
