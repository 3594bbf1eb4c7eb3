"""What NCCL said it used (a pasted NCCL_DEBUG=INFO log, or the live allreduce's rank logs) held
against what the node has: sockets where RDMA ports are up, GPUDirect RDMA off, ranks of one node
talking over the network, NCCL's own diagnostics, and ranks of one job that disagree.

The judgments read the log's JSON form (doctor/facts/nccl/log.py ``to_json``), which is what
both a pasted log (NcclFacts.log) and the live allreduce (RunResult.nccl) keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from doctor.core.model import Finding, Fix, Severity
from doctor.core.nodeset import compact, split_by_value
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts, nccl_logs
from doctor.facts.nccl.names import UNKNOWN_HOST
from doctor.facts.network.rdma import RdmaFacts
from doctor.facts.node import NodeFacts
from doctor.nic.choice import NicPlan
from doctor.plugin import Skip, cluster_check

CODES = {
    "nccl.log.socket_fallback": "RDMA ports are up but NCCL sent over sockets (names the reason)",
    "nccl.log.gdr_off": "NCCL's RDMA channels ran without GPUDirect RDMA where it was possible",
    "nccl.log.intra_node_network": "ranks on one node talked through the network, not P2P/SHM",
    "nccl.log.diagnostics": "NCCL's own diagnostics (NCCL_RUN_DIAGNOSTICS, 2.31+) saw a problem",
    "nccl.log.bootstrap": "NCCL bootstrapped on another interface than the doctor predicts",
}
DRIFT_CODES = {
    "nccl.log.drift": "ranks of one job showed different NCCL versions, networks, plugins or "
    "NCCL_* settings: the classic silent hang",
    "nccl.log.not_shown": "settings some ranks printed and others did not: not compared (info)",
}
TRUE = ("1", "true", "yes", "on")
IB_DISABLE = Fix(
    "NCCL_IB_DISABLE=1 turns InfiniBand/RoCE off: unset it (and NCCL_NET=Socket) where RDMA works.",
    commands("unset NCCL_IB_DISABLE NCCL_NET"),
)


def _env(proc: dict[str, Any], facts: NodeFacts | None, name: str) -> str | None:
    """A setting as the log showed it, else as the node's environment has it."""
    if name in proc["env"]:
        return str(proc["env"][name])
    env = facts.env if facts is not None else None
    return env.get(name) if isinstance(env, dict) else None


def _rdma(facts: NodeFacts | None) -> RdmaFacts | None:
    rdma = facts.rdma if facts is not None else None
    return rdma if isinstance(rdma, RdmaFacts) and rdma.present else None


def _active_ports(facts: NodeFacts | None) -> list[str]:
    rdma = _rdma(facts)
    if rdma is None:
        return []
    return [f"{h.name}:{p.number}" for h in rdma.hcas for p in h.ports if p.active]


def _socket_reason(proc: dict[str, Any], facts: NodeFacts | None) -> tuple[str, Fix]:
    """Why NCCL used sockets where RDMA devices exist, from the log first, then the node."""
    if (_env(proc, facts, "NCCL_IB_DISABLE") or "").lower() in TRUE:
        return "NCCL_IB_DISABLE=1 is set", IB_DISABLE
    net = _env(proc, facts, "NCCL_NET")
    if net and net.lower() == "socket":
        return "NCCL_NET=Socket is set", IB_DISABLE
    if proc["plugin"]["status"] == "failed":
        return (
            f"the net plugin failed to load ({proc['plugin']['errors'][0]})",
            Fix("Fix or remove the net plugin (NCCL_NET_PLUGIN, libnccl-net.so on the path)."),
        )
    rdma = _rdma(facts)
    if proc["libibverbs_missing"] or (rdma is not None and rdma.verbs_loadable is False):
        return "libibverbs (rdma-core) cannot be loaded", Fix(
            "Install rdma-core's libibverbs and the provider for the HCA in this image.",
            commands("apt-get install libibverbs1 ibverbs-providers"),
        )
    if rdma is not None and isinstance(rdma.uverbs, tuple) and not rdma.uverbs:
        return "/dev/infiniband is not visible (a container without the devices)", Fix(
            "Pass the RDMA devices into the container.",
            commands("docker run --device=/dev/infiniband ..."),
        )
    if "IB" in proc["no_devices"]:
        return "NCCL's IB transport found no usable device", Fix(
            "Check NCCL_IB_HCA against /sys/class/infiniband and that the ports are ACTIVE.",
            commands("ibv_devinfo | grep -E 'hca_id|state'"),
        )
    return "the log does not say why", Fix(
        "Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV and read the NET/IB lines."
    )


def _node_procs(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    by_host: dict[str, list[dict[str, Any]]] = {}
    for proc in doc["processes"]:
        by_host.setdefault(proc["host"] or UNKNOWN_HOST, []).append(proc)
    return by_host


def judge(
    node: str,
    procs: list[dict[str, Any]],
    use: dict[str, Any],
    facts: NodeFacts | None,
    bootstrap: bool,
) -> Iterator[Finding]:
    """One node's processes (``use``: its summary in the log's "nodes") against its facts;
    ``bootstrap``: hold the bootstrap interface against the prediction too (the live run's
    allreduce.nccl_iface_mismatch already does)."""
    said = use["summary"]
    sockets = [p for p in procs if p["network"] == "Socket"]
    rdma_seen = _active_ports(facts) or sorted({d for p in procs for d in p["ib_devices"]})
    if sockets and rdma_seen:
        reason, fix = _socket_reason(sockets[0], facts)
        yield Finding(
            "nccl.log.socket_fallback",
            Severity.WARN,
            f"NCCL sent over sockets on {node} though RDMA ports are up "
            f"({', '.join(rdma_seen[:4])}): {reason}",
            (node,),
            (said, f"RDMA: {', '.join(rdma_seen)}"),
            fix,
        )
    off = [p for p in procs if p["gdr"] is False]
    why = sorted({s for p in off for s in p["gdr_hcas"].values() if s != "disabled"})
    rdma = _rdma(facts)
    if off and (why or (rdma is not None and rdma.gdr_module is None)):
        yield Finding(
            "nccl.log.gdr_off",
            Severity.WARN,
            f"NCCL's RDMA channels on {node} ran without GPUDirect RDMA"
            + (f" ({'; '.join(why)})" if why else " (no peer-memory module on the node)"),
            (node,),
            (said,),
            Fix(
                "Load nvidia-peermem (or use the open kernel module on Linux 5.12+ for DMA-BUF), "
                "and leave NCCL_NET_GDR_LEVEL unset.",
                commands("sudo modprobe nvidia-peermem"),
            ),
        )
    # NCCL's own count of the ranks on its host; the processes of one hostname only where it
    # gave none (before 2.19): nodes that share a hostname are one name, not one host to NCCL.
    counted = [p["local_ranks"] for p in procs if p["local_ranks"] is not None]
    local = max(counted) if counted else len(procs)
    if local > 1 and use["inter_node"] and not use["intra_node"]:
        disabled = [
            f"{k}={v}"
            for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")
            if (v := _env(procs[0], facts, k)) and v.lower() in TRUE
        ]
        cause = ", ".join(disabled) or "no P2P or shared memory between the ranks' containers"
        yield Finding(
            "nccl.log.intra_node_network",
            Severity.WARN,
            f"{local} ranks on {node} talked through {'/'.join(use['inter_node'])}, not P2P or "
            f"SHM: {cause}",
            (node,),
            (said,),
            Fix(
                "Unset NCCL_P2P_DISABLE/NCCL_SHM_DISABLE; run the ranks in one container or with "
                "--ipc=host --pid=host; check ACS on the PCIe switches (doctor topo).",
            ),
        )
    for p in procs:
        for d in p["diagnostics"]:
            if d["status"] in ("FAIL", "WARN", "ERROR"):
                yield Finding(
                    "nccl.log.diagnostics",
                    Severity.FAIL if d["status"] != "WARN" else Severity.WARN,
                    f"NCCL's diagnostics on {node}: {d['text']}",
                    (node,),
                    (f"NCCL DIAG [{d['status']}] {d['text']}",),
                    Fix(
                        "Read the diagnostics' lines around it; rerun with NCCL_RUN_DIAGNOSTICS=1."
                    ),
                )
    plan = facts.nic if facts is not None else None
    if not bootstrap or not isinstance(plan, NicPlan) or plan.bootstrap.first is None:
        return
    want, got = plan.bootstrap.first.name, use["bootstrap"]
    if got and want not in got:
        right = plan.recommended.name if plan.recommended is not None else want
        basis = "every peer reached it" if plan.proven else "the replay of NCCL's choice picks it"
        yield Finding(
            "nccl.log.bootstrap",
            Severity.WARN,
            f"NCCL bootstrapped on {','.join(got)} on {node}; the doctor predicts {want} from the "
            f"node's interfaces and settings, and {right} is right ({basis})",
            (node,),
            (said, f"predicted: {want} ({plan.bootstrap.rule})"),
            Fix(
                "The log and the node's facts disagree (another environment, or an interface "
                "that came and went): pin the interface.",
                (command("export NCCL_SOCKET_IFNAME=={}", right),),
            ),
        )


# Settings ranks are not held to: how much NCCL says, and NCCL_HOSTID, which names each host
# (ranks of two nodes must differ there).
NOT_COMPARED = ("NCCL_DEBUG", "NCCL_HOSTID")
# Settings that may name each node's own devices: a difference is a warning.
PER_NODE = {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "NCCL_IB_GID_INDEX"}


# The values ranks of one job are held to: what each showed (None: it did not show it).
def _stated_network(proc: dict[str, Any]) -> str | None:
    """The network's own name ("Using network", the channels' NET/<name>), not a guess from the
    devices or sockets a rank listed: an IBext plugin lists NCCL's NET/IB devices."""
    return proc["network"] if proc.get("network_from") in ("said", "channels") else None


def _plugin_shown(proc: dict[str, Any]) -> str | None:
    return proc["plugin"]["name"] or proc["plugin"]["status"]


class _Rank(NamedTuple):
    label: str
    node: str | None  # None: the log did not say which host printed it (not a node)
    proc: dict[str, Any]


def _ranks(procs: list[tuple[str | None, dict[str, Any]]]) -> list[_Rank]:
    """The ranks to compare, each labelled. Lines that name neither host nor pid (their prefix
    was lost or cut) are read as one group, which may hold several ranks' lines: not a rank."""
    known = [(n, p) for n, p in procs if n is not None or p["pid"] is not None]
    nodes = [n for n, _ in known if n is not None]
    one_per_node = len(nodes) == len(known) and len(set(nodes)) == len(nodes)
    out = []
    for node, p in known:
        rank = f"rank {p['rank'] if p['rank'] is not None else '?'}"
        if node is None:
            label = f"pid {p['pid']} {rank}"
        else:
            label = node if one_per_node else f"{p['host'] or node} {rank}"
        out.append(_Rank(label, node, p))
    return out


def drift(procs: Iterable[tuple[str | None, dict[str, Any]]]) -> Iterator[Finding]:
    """Ranks of one job that showed different versions, networks, plugins or NCCL_* settings.

    Only what each rank showed is compared: NCCL prints a setting when it reads it, an excerpt
    or a collector's de-duplication (Ray) keeps some ranks' lines only, so a value one rank
    printed and another did not is not shown there, never a disagreement. Settings some ranks
    did not show are named in one info line."""
    ranks = _ranks(list(procs))
    keys = sorted({k for r in ranks for k in r.proc["env"] if not k.startswith(NOT_COMPARED)})
    wanted: list[tuple[str, list[Any]]] = [
        ("NCCL version", [r.proc["version"] for r in ranks]),
        ("network", [_stated_network(r.proc) for r in ranks]),
        ("net plugin", [_plugin_shown(r.proc) for r in ranks]),
    ]
    wanted += [(key, [r.proc["env"].get(key) for r in ranks]) for key in keys]
    partly: list[str] = []
    for what, values in wanted:
        shown = {r.label: v for r, v in zip(ranks, values, strict=True) if v is not None}
        split = split_by_value(shown)
        if split is None:
            if shown and len(shown) < len(ranks) and what in keys:
                partly.append(f"{what}={next(iter(shown.values()))} ({len(shown)} of {len(ranks)})")
            continue
        seen = f"{len(shown)} of {len(ranks)} ranks showed it"
        # An interface or HCA list may name each node's own devices on purpose.
        severity = Severity.WARN if what in PER_NODE else Severity.FAIL
        for value, who in split.others.items():
            yield Finding(
                "nccl.log.drift",
                severity,
                f"{what} differs between ranks of one job: {compact(who)} {value}, "
                f"{compact(split.reference_nodes)} {split.reference} ({seen})",
                tuple(sorted({r.node for r in ranks if r.label in who and r.node is not None})),
                (
                    f"{compact(who)}: {value}",
                    f"{compact(split.reference_nodes)}: {split.reference}",
                ),
                Fix(
                    "Run every rank from one image and one environment: the same NCCL, plugin "
                    "and NCCL_* settings on every node."
                ),
                data={"what": what, "shown_by": len(shown), "ranks": len(ranks)},
            )
    if partly:
        yield Finding(
            "nccl.log.not_shown",
            Severity.INFO,
            f"Some ranks did not print these settings, so they were not compared: "
            f"{', '.join(partly)} ranks showed them",
            (),
            tuple(partly),
            Fix(
                "NCCL prints a setting when it reads it; to compare every rank, read each "
                "rank's whole log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV)."
            ),
        )


@cluster_check(
    "nccl.log",
    "What NCCL's own log (pasted, or the allreduce's ranks') says it used, against the node",
    codes={**CODES, **DRIFT_CODES},
)
def nccl_log(cluster: ClusterFacts) -> Iterator[Finding]:
    found = list(nccl_logs(cluster))
    if not found:
        raise Skip("no NCCL_DEBUG=INFO log: none was given, and no NCCL allreduce ran")
    procs: list[tuple[str | None, dict[str, Any]]] = []
    for where, doc, node_of in found:
        by_host = _node_procs(doc)
        for use in doc["nodes"]:
            node = node_of.get(use["host"], use["host"])
            mine = by_host.get(use["host"], [])
            if node == UNKNOWN_HOST:  # lines that do not say which host printed them: no node
                procs.extend((None, p) for p in mine)
                continue
            yield from judge(node, mine, use, cluster.nodes.get(node), where == "log")
            procs.extend((node, p) for p in mine)
    yield from drift(procs)


CHECKS = [nccl_log]
