"""The report's "nics" section: per node what each library uses, and the recommendation; and its
"nccl" section: what NCCL said it used beside what the plan predicted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.core.model import Missing
from doctor.facts.cluster import ClusterFacts, nccl_logs
from doctor.facts.network.net import AF_INET
from doctor.nic.choice import NicPlan
from doctor.nic.frameworks import SocketChoice
from doctor.nic.plan import agrees, cluster_recommendation


def nics_section(by_node: Mapping[str, NicPlan | Missing]) -> dict[str, Any]:
    return {
        "nodes": {
            name: plan_json(p) if isinstance(p, NicPlan) else {"error": p.reason}
            for name, p in by_node.items()
        },
        "recommendation": cluster_recommendation(by_node),
    }


def _binding_json(choice: SocketChoice) -> dict[str, Any]:
    first = choice.bindings[0] if choice.bindings else None
    return {
        "interface": first.interface if first else None,
        "address": first.address if first else None,
        "rule": choice.rule,
        "devices": [
            {"interface": b.interface, "address": b.address, "error": b.error}
            for b in choice.bindings
        ],
        "problems": list(choice.problems),
    }


def plan_json(plan: NicPlan) -> dict[str, Any]:
    """The per-node part of `doctor nics --format json` and of the report's "nics" section."""
    first = plan.bootstrap.first
    nccl: dict[str, Any] = {
        "version": ".".join(map(str, plan.nccl_version)) if plan.nccl_version else None,
        "settings": {
            k: {"value": s.value, "source": s.source} for k, s in plan.nccl_settings.items()
        },
        "bootstrap": {
            "interface": first.name if first else None,
            "address": first.address if first else None,
            "rule": plan.bootstrap.rule,
            "error": plan.bootstrap.error,
        },
        "socket": [{"interface": a.name, "address": a.address} for a in plan.socket.interfaces],
        "net": "IB" if plan.ib and plan.ib.usable else "Socket",
    }
    if plan.ib is not None:
        nccl["ib"] = {
            "reason": plan.ib.reason,
            "ports": [f"{p.hca}:{p.port}/{p.transport}" for p in plan.ib.ports],
        }
    if plan.library is not None:
        lib_id = plan.library.id_address
        nccl["library"] = {
            "path": plan.library_path,
            "bootstrap": {
                "interface": plan.library.interface,
                "address": plan.library.address,
                "warning": plan.library.logged.warning,
            },
            "unique_id": {
                "family": _family(lib_id.family) if lib_id else None,
                "address": lib_id.address if lib_id else None,
                "port": lib_id.port if lib_id else None,
                "interface": plan.library.id_interface,
            },
            "agrees": agrees(plan),
        }
    return {
        "interfaces": [
            {
                "name": i.name,
                "kind": i.kind,
                "kind_from": i.kind_from,
                "state": i.state(),
                "mtu": i.mtu,
                "speed_mbps": i.speed_mbps,
                "addresses": [
                    {"address": a.address, "prefixlen": a.prefixlen, "scope": a.scope}
                    for a in i.addresses
                ],
                "master": i.master,
                "driver": i.driver,
                "pci": i.pci_address,
                "numa_node": i.numa_node,
            }
            for i in plan.net.interfaces.values()
        ],
        "default_route": list(plan.net.default_routes),
        "nccl": nccl,
        "gloo": _binding_json(plan.gloo),
        "tp": _binding_json(plan.tp),
        "mpi": {
            c.parameter: {
                "interfaces": list(c.interfaces),
                "rule": c.rule,
                "problems": list(c.problems),
            }
            for c in (plan.mpi_btl, plan.mpi_oob)
        },
        "recommendation": plan.recommendation(),
        "proven_reachable": sorted(plan.proven) if plan.proven is not None else None,
    }


def _family(family: int) -> str:
    return "AF_INET" if family == AF_INET else "AF_INET6"


def nccl_used(cluster: ClusterFacts) -> list[dict[str, Any]]:
    """Per node, what NCCL said it used (a given log, the allreduce's ranks' logs) beside what
    the doctor predicts: the report's "nccl" section; empty where NCCL said nothing."""
    rows = []
    for where, doc, node_of in nccl_logs(cluster):
        for use in doc["nodes"]:
            node = node_of.get(use["host"], use["host"])
            facts = cluster.nodes.get(node)
            plan = facts.nic if facts is not None else None
            predicted = "nothing: the node's interfaces are not known"
            if isinstance(plan, NicPlan):
                bootstrap, network = plan.predicted()
                predicted = f"NET/{network}, bootstrap {bootstrap or 'none'}"
            rows.append(
                {"node": node, "source": where, "used": use["summary"], "predicted": predicted}
            )
    return rows
