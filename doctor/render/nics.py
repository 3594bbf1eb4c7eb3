"""`doctor nics` on the terminal: the per-node interface table, the recommendation, exports."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from rich.console import Console
from rich.text import Text

from doctor.core.model import Missing
from doctor.core.nodeset import compact, group_nodes
from doctor.core.printable import say
from doctor.core.shell import Command, assignments, command
from doctor.facts.network.net import Interface
from doctor.nic.choice import NicPlan
from doctor.nic.plan import cluster_recommendation


def export_lines(by_node: Mapping[str, NicPlan | Missing]) -> list[Command]:
    """Shell lines that set the recommendation, then the matching launcher flags as comments
    (``eval "$(doctor nics --export)"`` runs them: every value is quoted)."""
    env = cluster_recommendation(by_node)
    lines = [command("export {}={}", k, v) for k, v in env.items()]
    if not env:
        return lines
    inline = assignments((k, v) for k, v in env.items() if not k.startswith("OMPI"))
    lines.append(command("# torchrun: {} torchrun --nnodes ... train.py", inline))
    gloo = env.get("GLOO_SOCKET_IFNAME")
    mpi = env.get("OMPI_MCA_btl_tcp_if_include")
    if gloo:
        lines.append(command("# horovodrun --network-interfaces {} ...", gloo))
    if mpi:
        sockets = assignments(((k, v) for k, v in env.items() if "SOCKET" in k), "-x")
        lines.append(
            command(
                "# mpirun --mca btl_tcp_if_include {0} --mca oob_tcp_if_include {0} {1} ...",
                mpi,
                sockets,
            )
        )
    if not gloo:
        recommended = {
            name: p.recommended.name
            for name, p in by_node.items()
            if isinstance(p, NicPlan) and p.recommended
        }
        for iface, nodes in sorted(group_nodes(recommended).items()):
            lines.append(command("# on {}: export GLOO_SOCKET_IFNAME={}", compact(nodes), iface))
    return lines


def _uses(plan: NicPlan, iface: Interface) -> list[str]:
    uses = []
    if plan.bootstrap.first and plan.bootstrap.first.name == iface.name:
        uses.append("NCCL")
    elif any(a.name == iface.name for a in plan.socket.interfaces):
        uses.append("nccl-socket")
    if any(b.interface == iface.name for b in plan.gloo.bindings):
        uses.append("Gloo")
    if iface.name in plan.mpi_btl.interfaces:
        uses.append("MPI")
    if plan.recommended and plan.recommended.name == iface.name:
        uses.append("*recommended")
    return uses


def _speed(iface: Interface) -> str:
    if iface.speed_mbps is None:
        return "?"
    return f"{iface.speed_mbps // 1000}G" if iface.speed_mbps >= 1000 else f"{iface.speed_mbps}M"


def render_table(by_node: Mapping[str, NicPlan | Missing], console: Console) -> None:
    for name, plan in by_node.items():
        console.print(Text(name, style="bold"))
        if isinstance(plan, Missing):
            console.print(f"  interfaces unknown: {plan.reason}")
            continue
        console.print(
            Text(
                f"  {'interface':<15} {'kind':<9} {'state':<10} {'mtu':>5} {'speed':>6}  "
                f"{'addresses':<34} used by",
                style="dim",
            )
        )
        for iface in plan.net.interfaces.values():
            addrs = " ".join(a.text() for a in iface.addresses) or "-"
            # "?": guessed from the name (a paste shows no sysfs); "*": a bond's or bridge's port
            kind = iface.kind + ("?" if iface.kind_from == "name" else "")
            kind += "*" if iface.slave_kind else ""
            console.print(
                f"  {iface.name:<15} {kind:<9} {iface.state():<10} {iface.mtu or '?':>5} "
                f"{_speed(iface):>6}  {addrs:<34} {' '.join(_uses(plan, iface))}",
                markup=False,
            )
        if any(i.kind_from == "name" for i in plan.net.interfaces.values()):
            console.print("  kind?: guessed from the name; pasted text shows no sysfs", style="dim")
        first = plan.bootstrap.first
        version = ".".join(map(str, plan.nccl_version)) if plan.nccl_version else "unknown"
        chosen = f"{first.name}:{first.address}" if first else f"none ({plan.bootstrap.error})"
        lines = [f"NCCL {version} bootstrap: {chosen}  [{plan.bootstrap.rule}]"]
        if plan.library is not None:
            mark = "agrees" if chosen.startswith(f"{plan.library.interface}:") else "DIFFERS"
            lines.append(f"libnccl says: {plan.library.interface}:{plan.library.address} ({mark})")
        if plan.socket.interfaces:
            lines.append(
                "NET/Socket: " + " ".join(f"{a.name}:{a.address}" for a in plan.socket.interfaces)
            )
        if plan.ib is not None:
            ports = " ".join(f"{p.hca}:{p.port}/{p.transport}" for p in plan.ib.ports)
            lines.append(
                f"NET: {'IB' if plan.ib.usable else 'Socket'} ({plan.ib.reason}) {ports}".rstrip()
            )
        for label, choice in (("Gloo", plan.gloo), ("TensorPipe", plan.tp)):
            b = choice.bindings[0] if choice.bindings else None
            lines.append(
                f"{label}: {b.interface if b else '?'}:{b.address if b else '?'}  [{choice.rule}]"
            )
        for c in (plan.mpi_btl, plan.mpi_oob):
            lines.append(f"Open MPI {c.parameter}: {', '.join(c.interfaces) or 'none'}  [{c.rule}]")
        for line in lines:
            console.print(f"  {line}", markup=False)
    rec = cluster_recommendation(by_node)
    console.print(Text("\nRecommendation", style="bold underline"))
    if not rec:
        console.print("  no interface with a routable address was found", markup=False)
    for line in export_lines(by_node):
        console.print(f"  {line}", markup=False)


def print_exports(by_node: Mapping[str, NicPlan | Missing]) -> int:
    """`doctor nics --export`: the lines on stdout (exit 0), or why there are none (exit 1)."""
    lines = export_lines(by_node)
    if not lines:
        say("no interface with a routable address")
        return 1
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
