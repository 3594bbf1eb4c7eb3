"""The allreduce stage judged: did a real allreduce pass, is one node slow, did NCCL choose what the
NIC replay predicted, and what the ranks' own logs say went wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from statistics import median
from typing import TYPE_CHECKING, Generic, TypeVar

from doctor.core.model import Finding, Fix, Severity
from doctor.core.shell import Command, command
from doctor.facts.allreduce import AllreduceFacts, RunResult
from doctor.facts.cluster import ClusterFacts
from doctor.facts.groups import GroupSearch
from doctor.nic.choice import NicPlan
from doctor.plugin import Skip, cluster_check, need

if TYPE_CHECKING:
    from doctor.explain.catalogue import Signature

V = TypeVar("V")
# The programs whose messages a rank's own output can carry; launcher messages (ssh, mpirun,
# horovodrun) never reach it, since the doctor starts the ranks itself.
RANK_SOURCES = ("nccl", "pytorch", "cuda", "gloo", "any")
NO_TORCH = "torch is not importable"  # the worker's words when the node's Python lacks torch

CODES = {
    "allreduce.failed": "the allreduce failed as configured; names each stuck rank and its phase",
    "allreduce.timeout": "a rank overran its phase deadline; every rank was killed",
    "allreduce.slow_start": "ranks were still starting (import torch) at the launch deadline: "
    "the allreduce was not run; names the slow nodes when they are a few, none when most were "
    "slow (a slow shared filesystem or loaded nodes)",
    "allreduce.wrong_result": "the allreduce returned a sum that differs from the exact one",
    "allreduce.recommendation_fails": "the recommended settings fail where the current ones pass",
    "allreduce.slow_node": "one node's links are far slower than the others'",
    "allreduce.not_started": "the rendezvous could not be set up (port taken, no address)",
    "allreduce.nccl_iface_mismatch": "NCCL bootstrapped on another interface than predicted",
    "allreduce.nccl_transport_mismatch": "NCCL used another network than predicted (IB/Socket)",
    "allreduce.nccl_nnodes": "NCCL counted a different number of nodes than there are",
    "allreduce.bad_node": "group testing: every allreduce this node joins fails or hangs, also "
    "with a node known good",
    "allreduce.slow_member": "group testing: every allreduce this node joins runs far slower "
    "than the other groups of its size, also with a node known good",
    "allreduce.bad_pair": "group testing: two nodes fail together, each passes with the others "
    "(the path between them)",
    "allreduce.search_unresolved": "group testing could not pin the failure or slowness on a "
    "few nodes (a shared cause, or it did not come back)",
}


class WithDiagnosis(Mapping[str, V], Generic[V]):
    """Our own entries plus one per log-diagnosis signature a rank's output can carry (doctor
    explain's catalogue), read on first use: compiling the catalogue costs ~10 ms that commands
    which never judge an allreduce should not pay at start-up."""

    def __init__(self, own: dict[str, V], of: Callable[[Signature], V]) -> None:
        self._own, self._of = own, of

    @cached_property
    def _all(self) -> dict[str, V]:
        from doctor.explain.catalogue import catalogue

        rank = [s for s in catalogue() if s.source in RANK_SOURCES]
        return {**self._own, **{s.code: self._of(s) for s in rank}}

    def __getitem__(self, code: str) -> V:
        return self._all[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)


@dataclass(frozen=True)
class Prediction:
    """What the NIC replay says NCCL will use on one node."""

    bootstrap: str | None  # interface name
    network: str  # "IB" or "Socket"


def predictions(cluster: ClusterFacts) -> dict[str, Prediction]:
    """From each node's NIC plan (a node without one predicts nothing)."""
    found = {}
    for name, facts in cluster.nodes.items():
        if isinstance(facts.nic, NicPlan):
            found[name] = Prediction(*facts.nic.predicted())
    return found


DECLARED = WithDiagnosis(CODES, lambda s: s.meaning.rstrip("."))


@cluster_check(
    "allreduce",
    "A real allreduce across every node",
    needs=("allreduce",),
    codes=DECLARED,
    fixes=WithDiagnosis({}, lambda s: s.fix),
)
def allreduce(cluster: ClusterFacts) -> Iterator[Finding]:
    facts = need(cluster.allreduce)
    if facts.skipped:
        raise Skip(facts.skipped)
    if facts.not_started:
        yield not_started(facts)
        return
    yield from verdict(facts)
    yield from slow_node(facts.runs)
    if facts.search is not None:
        yield from culprits(facts.search)
    configured = facts.runs[0]
    if facts.backend == "nccl":
        yield from nccl_choices(configured, predictions(cluster))
    if configured.status in ("failed", "timeout") and not configured.slow_start:
        yield from log_findings(configured)


# What a rank says when it cannot reach the rendezvous store: before the store listened (rank 0
# had not got that far), the consequence of rank 0's own trouble, which the verdict names.
STORE_UNREACHED = "torch.store.connect_timeout"


def log_findings(run: RunResult) -> Iterator[Finding]:
    """The log diagnosis of a failed run's ranks, less the consequences of rank 0's store."""
    for f in run.log_findings or ():
        if f.code in DECLARED and (run.store_up or f.code != STORE_UNREACHED):
            yield f


def not_started(facts: AllreduceFacts) -> Finding:
    where = f"{facts.master}:{facts.port}"
    return Finding(
        "allreduce.not_started",
        Severity.FAIL,
        f"allreduce not started: {facts.not_started}",
        (facts.master,),
        (f"rendezvous {where}",),
        Fix(
            "Pick a free port for the rendezvous.",
            (command("doctor allreduce --port {}", facts.port + 1),),
        )
        if facts.port_taken
        else None,
    )


def _longer_start(launch: float) -> Command:
    return command("doctor preflight ... --launch-timeout {}", f"{max(120, 4 * launch):g}")


def _exports(env: dict[str, str]) -> tuple[Command, ...]:
    return tuple(command("export {}={}", k, v) for k, v in sorted(env.items()))


def verdict(facts: AllreduceFacts) -> Iterator[Finding]:
    """The configured run's outcome, judged against the recommended run when there is one."""
    configured = facts.runs[0]
    recommended = facts.runs[1] if len(facts.runs) > 1 else None
    if configured.slow_start:
        yield slow_start(configured)
    elif configured.status in ("failed", "timeout"):
        culprits = configured.behind()
        evidence = [configured.sentence(r) for r in configured.ranks if not r.done]
        if recommended is not None:
            evidence.append(recommended.headline())
        if recommended is not None and recommended.status == "passed":
            fix = Fix(
                "It fails as configured and passes with the recommended settings: set them on "
                "every node (job script or /etc/environment).",
                _exports(facts.recommendation),
            )
        elif any(NO_TORCH in r.error for r in culprits):
            fix = Fix(
                "Name the nodes' interpreter that has torch (the one training uses).",
                (
                    command(
                        "doctor allreduce --python /path/to/venv/bin/python   # was {}",
                        facts.python,
                    ),
                ),
            )
        elif any(r.gone for r in culprits):
            node = next(r.node for r in culprits if r.gone)
            fix = Fix(
                "The named ranks' processes, or their nodes, went while the allreduce ran: check "
                "that each node is up and what ended its rank (the kernel log: the OOM killer, a "
                "reboot; the scheduler's state of the node).",
                (
                    command("dmesg -T | tail -n 50   # on {}", node),
                    command("scontrol show node {}   # SLURM", node),
                ),
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
        yield Finding(
            code,
            Severity.FAIL,
            configured.headline(),
            tuple(dict.fromkeys(r.node for r in culprits)),
            tuple(evidence),
            fix,
            {"rendezvous": configured.master},
        )
    elif (
        configured.status == "passed"
        and recommended is not None
        and recommended.status in ("failed", "timeout")
    ):
        yield Finding(
            "allreduce.recommendation_fails",
            Severity.WARN,
            "the current settings pass but the recommended ones do not: " + recommended.headline(),
            tuple(dict.fromkeys(r.node for r in recommended.behind())),
            tuple(recommended.sentence(r) for r in recommended.ranks if not r.done),
            Fix("Keep the current settings; do not apply the recommendation."),
        )


def slow_start(run: RunResult) -> Finding:
    """Ranks still starting at the launch deadline: at most a warning. No rank had met another,
    so nothing about the network or any node's health was tried; it names the slow nodes when
    they are a few (their disks, load or mounts), none when most were slow (the machine or the
    filesystem they share)."""
    starting = run.still_starting()
    launch = run.plan.deadlines.launch
    most = 2 * len(starting) > len(run.ranks)
    nodes = () if most else tuple(dict.fromkeys(r.node for r in starting))
    started = run.start_seconds()
    others = (
        f"; the other {len(started)} had in at most {started[-1]:.1f}s (median "
        f"{median(started):.1f}s)"
        if started
        else ""
    )
    if most:
        why = (
            "torch loads slowly on most nodes at once (a shared filesystem under load, "
            "overloaded nodes): give the ranks longer to start."
        )
    else:
        why = (
            f"{', '.join(nodes)} started far slower than the others: check their load, disks "
            "and filesystem mounts; if they are only slow, give the ranks longer to start."
        )
    return Finding(
        "allreduce.slow_start",
        Severity.WARN,
        f"{run.label}: not run: {len(starting)} of {len(run.ranks)} ranks were still starting "
        f"(import torch) after {launch:g}s{others}",
        nodes,
        tuple(run.sentence(r) for r in starting[:5]),
        Fix(why, (_longer_start(launch),)),
        {"still_starting": len(starting), "started_s": [round(t, 1) for t in started]},
    )


def slow_node(runs: tuple[RunResult, ...]) -> Iterator[Finding]:
    """The first run that pins a slow node names it (the same node in both runs is one finding)."""
    for run in runs:
        slow = run.slow_node()
        if slow is None:
            continue
        node, its, typical = slow
        yield Finding(
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
                (
                    command("ethtool <nic>   # on {}", node),
                    command("tc qdisc show   # on {}", node),
                ),
            ),
            {"gbps": its, "typical_gbps": typical},
        )
        return


def culprits(search: GroupSearch) -> Iterator[Finding]:
    """What group testing pinned (each node, each pair, naming only them), and what it could
    not; every finding says how many rounds and tests it took, and how long."""
    how = search.summary()
    data = {"rounds": search.rounds, "tests": len(search.tests), "seconds": search.seconds}
    for node in search.bad_nodes:
        tests = search.involving(node)
        last = tests[-1]  # its confirmation, with a node known good
        partner = last.partner or "a node known good"
        if search.mode == "slow":
            speed = f"{(last.busbw_gbps or 0) * 8e3:.1f} Mbit/s"
            ref = f"{(last.reference_gbps or 0) * 8e3:.1f} Mbit/s"
            yield Finding(
                "allreduce.slow_member",
                Severity.FAIL,
                f"{node} holds every allreduce it joins far below the other groups: {speed} with "
                f"{partner} (known good), where healthy groups ran at {ref} ({how})",
                (node,),
                tuple(t.line() for t in tests),
                Fix(
                    f"Check {node}'s NIC speed, cabling and traffic shaping; leave it out of the "
                    "job until then (doctor run --spares 1).",
                    (
                        command("ethtool <nic>   # on {}", node),
                        command("tc qdisc show   # on {}", node),
                    ),
                ),
                data,
            )
        else:
            yield Finding(
                "allreduce.bad_node",
                Severity.FAIL,
                f"{node} fails every allreduce it joins, also with {partner} (known good): "
                f"{last.headline or 'failed'} ({how})",
                (node,),
                tuple(t.line() for t in tests),
                Fix(
                    f"Fix what {node}'s rank hit (the evidence's first failure); leave it out of "
                    "the job until then (doctor run --spares 1).",
                    (command("doctor allreduce -H {},{}", partner, node),),
                ),
                data,
            )
    for a, b in search.bad_pairs:
        yield Finding(
            "allreduce.bad_pair",
            Severity.FAIL,
            f"{a} and {b} fail together, each passes with the other nodes: the path between "
            f"them ({how})",
            (a, b),
            tuple(t.line() for t in search.involving(a, b)),
            Fix(
                f"Check the route, firewall and MTU between {a} and {b} (both ways).",
                (
                    command("doctor allreduce -H {},{}", a, b),
                    command("doctor preflight -H {},{}", a, b),
                ),
            ),
            data,
        )
    if search.unresolved:
        suspects = f"suspects: {','.join(search.suspects)}" if search.suspects else ""
        yield Finding(
            "allreduce.search_unresolved",
            Severity.INFO,
            f"{how}: {search.unresolved}",
            (),
            tuple(filter(None, [suspects, *(t.line() for t in search.tests[:12])])),
            None,
            data,
        )


def nccl_choices(run: RunResult, predicted: dict[str, Prediction]) -> Iterator[Finding]:
    """Where NCCL's own log differs from the prediction: interface, transport, node count."""
    if run.nccl_log is None or run.nccl_log.is_empty():
        return
    log = run.nccl_log
    node_of_host = {r.host: r.node for r in run.ranks if r.host}
    for proc in log.processes.values():
        node = node_of_host.get(proc.host or "", proc.host or "?")
        want = predicted.get(node)
        if want is None:
            continue
        where = f"{node} (rank {proc.rank})" if proc.rank is not None else node
        if proc.bootstrap and want.bootstrap and proc.bootstrap[0][0] != want.bootstrap:
            iface, addr = proc.bootstrap[0]
            yield Finding(
                "allreduce.nccl_iface_mismatch",
                Severity.WARN,
                f"NCCL bootstrapped on {iface} ({addr}) on {where}; predicted {want.bootstrap}",
                (node,),
                (f"Bootstrap: Using {iface}:{addr}",),
                Fix(
                    "Pin NCCL to the interface you mean on every node.",
                    (command("export NCCL_SOCKET_IFNAME=={}", want.bootstrap),),
                ),
            )
        nets = sorted({t.split("/")[1] for t in proc.transports() if t.startswith("NET/")})
        wrong = [n for n in nets if n != want.network]
        if wrong:
            yield Finding(
                "allreduce.nccl_transport_mismatch",
                Severity.WARN,
                f"predicted NET/{want.network}, got NET/{'/'.join(wrong)} on {where}",
                (node,),
                tuple(f"{t}: {n} channel connections" for t, n in proc.transports().items()),
                Fix(
                    "Check the HCAs NCCL can use (NCCL_IB_HCA, port state, rdma-core) on "
                    f"{node}; 'doctor nics' shows the prediction."
                ),
            )
    nodes = len({r.node for r in run.ranks})
    counted = log.nnodes()
    if counted is not None and counted != nodes:
        yield Finding(
            "allreduce.nccl_nnodes",
            Severity.FAIL if counted < nodes else Severity.WARN,
            f"NCCL counted {counted} node(s) for {nodes}: host identity (hostname + boot_id "
            "or NCCL_HOSTID) is not unique per node"
            if counted < nodes
            else f"NCCL counted {counted} nodes for {nodes}",
            tuple(sorted({r.node for r in run.ranks})),
            (f"nNodes {counted} in NCCL's init lines",),
            Fix("Give every node its own hostname and boot_id; never share NCCL_HOSTID."),
        )


CHECKS = [allreduce]
