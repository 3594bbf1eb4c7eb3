"""What the ranks' own output says: the log diagnosis on failure, NCCL's choices against ours.

Every rank's stderr (and its one-line error) goes through ``doctor explain``'s scanner; with
NCCL the same pass reads the ``NCCL_DEBUG=INFO`` lines (version, bootstrap interface, transports
per channel, nNodes), which are then held against the NIC prediction for each node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from doctor.allreduce.result import RunResult
from doctor.explain.engine import Explanation, Scanner
from doctor.model import Finding, Fix, Missing, Severity
from doctor.nic.plan import NicPlan


@dataclass(frozen=True)
class Prediction:
    """What the NIC replay says NCCL will use on one node."""

    bootstrap: str | None  # interface name
    network: str  # "IB" or "Socket"


def predictions(by_node: Mapping[str, NicPlan | Missing]) -> dict[str, Prediction]:
    """From the nics helper's per-node plans (a node without a plan predicts nothing)."""
    found = {}
    for name, plan in by_node.items():
        if isinstance(plan, NicPlan):
            first = plan.bootstrap.first
            network = "IB" if plan.ib is not None and plan.ib.usable else "Socket"
            found[name] = Prediction(first.name if first else None, network)
    return found


def scan(run: RunResult) -> Explanation:
    """Feed every rank's captured output through the log diagnosis, one source per rank."""
    scanner = Scanner()
    for r in run.ranks:
        lines = r.stderr.splitlines()
        if r.error:
            lines.append(r.error)
        scanner.feed_lines([line.encode() for line in lines], f"rank {r.rank} ({r.node})", 1)
    return scanner.result


def nccl_findings(
    run: RunResult, seen: Explanation, predicted: dict[str, Prediction]
) -> list[Finding]:
    """Where NCCL's own log differs from the prediction: interface, transport, node count."""
    log = seen.nccl
    node_of_host = {r.host: r.node for r in run.ranks if r.host}
    findings = []
    for proc in log.processes.values():
        node = node_of_host.get(proc.host or "", proc.host or "?")
        want = predicted.get(node)
        if want is None:
            continue
        where = f"{node} (rank {proc.rank})" if proc.rank is not None else node
        if proc.bootstrap and want.bootstrap and proc.bootstrap[0][0] != want.bootstrap:
            iface, addr = proc.bootstrap[0]
            findings.append(
                Finding(
                    "allreduce.nccl_iface_mismatch",
                    Severity.WARN,
                    f"NCCL bootstrapped on {iface} ({addr}) on {where}; predicted {want.bootstrap}",
                    (node,),
                    (f"Bootstrap: Using {iface}:{addr}",),
                    Fix(
                        "Pin NCCL to the interface you mean on every node.",
                        (f"export NCCL_SOCKET_IFNAME=={want.bootstrap}",),
                    ),
                )
            )
        nets = sorted({t.split("/")[1] for t in proc.transports() if t.startswith("NET/")})
        wrong = [n for n in nets if n != want.network]
        if wrong:
            findings.append(
                Finding(
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
            )
    nodes = len({r.node for r in run.ranks})
    counted = log.nnodes()
    if counted is not None and counted != nodes:
        findings.append(
            Finding(
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
        )
    return findings
