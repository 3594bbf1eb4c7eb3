"""What the NIC checks share: the node's plan, the fix that pins every library, names."""

from __future__ import annotations

from doctor.core.model import Fix
from doctor.core.shell import command
from doctor.facts.network.net import IfAddr
from doctor.facts.node import NodeFacts
from doctor.nic.choice import NicPlan
from doctor.nic.plan import reach_address
from doctor.plugin import need

SLOW_MBPS = 1000


def plan_of(facts: NodeFacts) -> NicPlan:
    """The node's NIC plan (derived once by the pipeline), or skip with why there is none."""
    return need(facts.nic, "network interfaces")


def pin(plan: NicPlan, text: str) -> Fix:
    """Pin every library to the recommended interface (or say that none is usable)."""
    env = plan.recommendation()
    if not env and plan.proven is not None:
        return Fix(
            text + " No interface of this node was reached by every peer over TCP: "
            "fix the paths the reach.* findings name first."
        )
    if not env:
        return Fix(
            text + " No interface on this node has a routable address: fix the network first."
        )
    return Fix(text, tuple(command("export {}={}", k, v) for k, v in env.items()))


def where(a: IfAddr) -> str:
    return f"{a.name}:{a.address}"


def addresses(plan: NicPlan) -> str:
    have = ", ".join(where(a) for a in plan.net.ifaddrs) or "no addresses at all"
    return f"addresses here: {have}"


def reached(plan: NicPlan, name: str | None) -> bool:
    """False only for an interface the reachability stage tested and not every peer reached."""
    iface = plan.net.interfaces.get(name or "")
    return (
        plan.proven is None
        or iface is None
        or reach_address(iface) is None
        or iface.name in plan.proven
    )


def proven_text(plan: NicPlan) -> str:
    return "reached by every peer: " + (", ".join(sorted(plan.proven or ())) or "nothing")
