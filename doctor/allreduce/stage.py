"""The allreduce stage: as configured, and as recommended when that differs; findings from both."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from doctor.allreduce.evidence import Prediction, nccl_findings, scan
from doctor.allreduce.launch import Launcher
from doctor.allreduce.plan import Deadlines, Plan, Rank, default_sizes
from doctor.allreduce.result import RunResult
from doctor.allreduce.run import rendezvous_address, run_plan
from doctor.explain.engine import findings as explain_findings
from doctor.inventory import Node
from doctor.model import CheckOutcome, Finding, Fix, Severity, Status, status_of

CHECK_ID = "allreduce"
TITLE = "A real allreduce across every node"
CODES = {
    "allreduce.failed": "the allreduce failed as configured; names each stuck rank and its phase",
    "allreduce.timeout": "a rank overran its phase deadline; every rank was killed",
    "allreduce.wrong_result": "the allreduce returned a sum that differs from the exact one",
    "allreduce.recommendation_fails": "the recommended settings fail where the current ones pass",
    "allreduce.slow_node": "one node's links are far slower than the others'",
    "allreduce.not_started": "the rendezvous could not be set up (port taken, no address)",
    "allreduce.nccl_iface_mismatch": "NCCL bootstrapped on another interface than predicted",
    "allreduce.nccl_transport_mismatch": "NCCL used another network than predicted (IB/Socket)",
    "allreduce.nccl_nnodes": "NCCL counted a different number of nodes than there are",
}
# Variables whose first name is an interface the rendezvous can use, in order of preference.
IFACE_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


@dataclass(frozen=True)
class Request:
    nodes: tuple[Node, ...]
    backend: str = "gloo"  # gloo | nccl
    gpus: dict[str, int] = field(default_factory=dict)  # NCCL: ranks per node
    port: int = 29500
    python: str = "python3"
    deadlines: Deadlines = field(default_factory=Deadlines)
    sizes: tuple[int, ...] = field(default_factory=default_sizes)
    recommendation: dict[str, str] = field(default_factory=dict)
    rendezvous_iface: str | None = None
    predicted: dict[str, Prediction] = field(default_factory=dict)  # NCCL's choice, per node


@dataclass
class StageResult:
    runs: list[RunResult]
    findings: list[Finding]
    rendezvous: str
    request: Request
    skipped: str = ""  # why the stage did not run at all

    def outcome(self) -> CheckOutcome:
        if self.skipped:
            return CheckOutcome(CHECK_ID, Status.SKIP, None, (), self.skipped, 0.0, TITLE)
        # The log diagnosis keeps its own check name ("explain"); the rest are ours.
        findings = tuple(f if f.check else replace(f, check=CHECK_ID) for f in self.findings)
        seconds = round(sum(r.seconds for r in self.runs), 3)
        return CheckOutcome(CHECK_ID, status_of(findings), None, findings, "", seconds, TITLE)

    @property
    def interrupted(self) -> bool:
        return any(r.status == "interrupted" for r in self.runs)

    def section(self) -> dict[str, Any]:
        """The ``allreduce`` section of the JSON report."""
        first = self.runs[0] if self.runs else None
        return {
            "backend": self.request.backend,
            "world_size": len(ranks_for(self.request)),
            "rendezvous": self.rendezvous,
            "recommendation": self.request.recommendation or None,
            "status": first.status if first else ("skipped" if self.skipped else "not_started"),
            "skipped": self.skipped or None,
            "verified": bool(first and first.verified),
            "runs": [r.to_json() for r in self.runs],
        }


def iface_hint(request: Request) -> str | None:
    """An exact interface name to find the rendezvous address on, if the settings give one."""
    if request.rendezvous_iface:
        return request.rendezvous_iface
    for var in IFACE_VARS:
        value = request.recommendation.get(var, "")
        first = value.split(",")[0].lstrip("=")
        if first and not value.startswith("^"):
            return first
    return None


def ranks_for(request: Request) -> tuple[Rank, ...]:
    """One rank per GPU with NCCL, one per node with Gloo; in inventory order."""
    ranks: list[Rank] = []
    for node in request.nodes:
        per_node = request.gpus.get(node.name, 0) if request.backend == "nccl" else 1
        for local in range(max(1, per_node)):
            ranks.append(Rank(len(ranks), node, local))
    return tuple(ranks)


def differs(recommendation: dict[str, str], run: RunResult) -> bool:
    """Whether any rank's environment differs from the recommendation (unknown counts as yes)."""
    if not recommendation:
        return False
    return any(
        not r.host or any(r.env.get(k) != v for k, v in recommendation.items()) for r in run.ranks
    )


def run_stage(request: Request, launcher: Launcher) -> StageResult:
    master = request.nodes[0]
    ranks = ranks_for(request)
    if len(ranks) < 2:
        why = "one rank: nothing to reduce across (add nodes, or GPUs with --backend nccl)"
        return StageResult([], [], f"{master.name}:{request.port}", request, why)
    hint = iface_hint(request)
    timeout = request.deadlines.launch
    addr, free, error = rendezvous_address(
        launcher, master, hint, request.port, request.python, timeout
    )
    where = f"{master.name}:{request.port}"
    if error or not free:
        why = error or f"port {request.port} is already in use on {master.name}"
        finding = Finding(
            "allreduce.not_started",
            Severity.FAIL,
            f"allreduce not started: {why}",
            (master.name,),
            (f"rendezvous {where}",),
            Fix(
                "Pick a free port for the rendezvous.",
                (f"doctor allreduce --port {request.port + 1}",),
            )
            if not error
            else None,
        )
        return StageResult([], [finding], where, request)
    rendezvous = addr or master.address or "127.0.0.1"
    plan = Plan(
        ranks=ranks,
        backend=request.backend,
        port=request.port,
        master_addr=rendezvous,
        deadlines=request.deadlines,
        sizes=request.sizes,
        python=request.python,
    )
    runs = [run_plan(plan, launcher, "as configured")]
    if runs[0].status != "interrupted" and differs(request.recommendation, runs[0]):
        env: dict[str, str | None] = dict(request.recommendation)
        runs.append(run_plan(replace(plan, env=env), launcher, "as recommended"))
    findings = findings_of(runs, request) + evidence_of(runs, request)
    return StageResult(runs, findings, f"{where} ({rendezvous})", request)


def evidence_of(runs: list[RunResult], request: Request) -> list[Finding]:
    """The ranks' own output: NCCL's choices (kept in the run), and on failure the diagnosis."""
    findings: list[Finding] = []
    for index, run in enumerate(runs):
        seen = scan(run)
        if request.backend == "nccl" and not seen.nccl.is_empty():
            run.nccl = seen.nccl.to_json()
            if index == 0:
                findings += nccl_findings(run, seen, request.predicted)
        if index == 0 and run.status in ("failed", "timeout"):
            findings += explain_findings(seen)
    return findings


def _exports(env: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"export {k}={v}" for k, v in sorted(env.items()))


def findings_of(runs: list[RunResult], request: Request) -> list[Finding]:
    """Findings from the configured run, judged against the recommended one when there is one."""
    configured = runs[0]
    recommended = runs[1] if len(runs) > 1 else None
    findings: list[Finding] = []
    if configured.status in ("failed", "timeout"):
        culprits = configured.behind()
        evidence = [configured.sentence(r) for r in configured.ranks if not r.done]
        if recommended is not None:
            evidence.append(recommended.headline())
        if recommended is not None and recommended.status == "passed":
            fix = Fix(
                "It fails as configured and passes with the recommended settings: set them on "
                "every node (job script or /etc/environment).",
                _exports(request.recommendation),
            )
        else:
            fix = Fix(
                "Fix what the named ranks hit first (interface, route, firewall, port), then "
                "run 'doctor allreduce' again."
            )
        wrong = [r for r in configured.ranks if r.verify.get("wrong")]
        code = "allreduce.timeout" if configured.status == "timeout" else "allreduce.failed"
        if wrong:
            code = "allreduce.wrong_result"
            culprits = wrong
        findings.append(
            Finding(
                code,
                Severity.FAIL,
                configured.headline(),
                tuple(dict.fromkeys(r.node for r in culprits)),
                tuple(evidence),
                fix,
                {"rendezvous": configured.master},
            )
        )
    elif (
        configured.status == "passed"
        and recommended is not None
        and recommended.status in ("failed", "timeout")
    ):
        findings.append(
            Finding(
                "allreduce.recommendation_fails",
                Severity.WARN,
                "the current settings pass but the recommended ones do not: "
                + recommended.headline(),
                tuple(dict.fromkeys(r.node for r in recommended.behind())),
                tuple(recommended.sentence(r) for r in recommended.ranks if not r.done),
                Fix("Keep the current settings; do not apply the recommendation."),
            )
        )
    for run in runs:
        slow = run.slow_node()
        if slow is None:
            continue
        node, its, typical = slow
        findings.append(
            Finding(
                "allreduce.slow_node",
                Severity.WARN,
                f"{node}'s links run at {its * 8e3:.1f} Mbit/s, the other nodes' at "
                f"{typical * 8e3:.1f} Mbit/s ({run.label})",
                (node,),
                tuple(
                    f"{row['src']} -> {row['dst']}: {row['bytes']} bytes in {row['time_s']:.4f} s"
                    for row in run.link_rows()
                    if node in (row["src"], row["dst"])
                ),
                Fix(
                    f"Check {node}'s NIC speed, cabling and traffic shaping.",
                    (f"ethtool <nic>   # on {node}", f"tc qdisc show   # on {node}"),
                ),
                {"gbps": its, "typical_gbps": typical},
            )
        )
        break  # the same node in both runs is one finding
    return findings
