"""What NCCL used, per node and for the job, from the processes of one log (log.py).

"NCCL 2.21.5 used NET/IB mlx5_[0-3] (RoCE) with GDR, bootstrap ens5; P2P/IPC inside the node":
the sentence the report and `doctor explain` print per node, and the fields behind it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from doctor.core.nodeset import compact
from doctor.facts.nccl.names import UNKNOWN_HOST
from doctor.facts.nccl.process import NcclProcess

INTRA = ("P2P/", "SHM", "NVLS")


def _gdr(values: list[bool | None]) -> bool | str | None:
    """True, False, "partial" (some ranks' network channels without), or None (no channel)."""
    known = {v for v in values if v is not None}
    if not known:
        return None
    return known.pop() if len(known) == 1 else "partial"


@dataclass(frozen=True)
class NodeUse:
    """What the processes of one host said they used."""

    host: str
    ranks: tuple[int, ...]
    library: str
    versions: tuple[str, ...]
    networks: tuple[str, ...]
    # No line named the network: it was inferred from the source files and subsystems of the
    # node's WARN lines (transport/net_ib.cc, "NET/IB : Got completion ...").
    network_inferred: bool
    plugin: str | None  # the loaded plugin's name, or "failed: ..." where loading failed
    hcas: tuple[str, ...]
    link_layers: tuple[str, ...]
    gdr: bool | str | None
    bootstrap: tuple[str, ...]
    socket_ifs: tuple[str, ...]
    intra: tuple[str, ...]  # P2P/IPC, SHM, NVLS: how ranks on the node talked
    inter: tuple[str, ...]  # NET/IB, NET/Socket, CollNet/...

    def sentence(self) -> str:
        version = f"{self.library} {'/'.join(self.versions)}" if self.versions else self.library
        if self.networks:
            net = f"NET/{'/'.join(self.networks)}"
            if self.network_inferred:
                net += " (inferred from its WARN lines: no line names the network)"
            if self.hcas:
                net += f" {compact(self.hcas)}"
                if self.link_layers:
                    net += f" ({'/'.join(self.link_layers)})"
            elif self.socket_ifs and "Socket" in self.networks:
                net += f" {','.join(self.socket_ifs)}"
            if self.gdr is True:
                net += " with GDR"
            elif self.gdr == "partial":
                net += " with GDR on some channels"
            elif self.gdr is False:
                net += " without GDR"
        else:
            net = "a network the log does not name"
        parts = [f"{version} used {net}"]
        if self.plugin:
            parts[0] += f" (plugin {self.plugin})"
        if self.bootstrap:
            parts.append(f"bootstrap {','.join(self.bootstrap)}")
        text = ", ".join(parts)
        if self.intra:
            text += f"; {', '.join(self.intra)} inside the node"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "ranks": list(self.ranks),
            "versions": list(self.versions),
            "networks": list(self.networks),
            "network_inferred": self.network_inferred,
            "plugin": self.plugin,
            "hcas": list(self.hcas),
            "link_layers": list(self.link_layers),
            "gdr": self.gdr,
            "bootstrap": list(self.bootstrap),
            "socket_interfaces": list(self.socket_ifs),
            "intra_node": list(self.intra),
            "inter_node": list(self.inter),
            "summary": self.sentence(),
        }


def _plugin(procs: list[NcclProcess]) -> str | None:
    for p in procs:
        if p.plugin.status() == "loaded":
            name = p.plugin.name or "loaded"
            return f"{name} {p.plugin.version}" if p.plugin.version else name
    for p in procs:
        if p.plugin.status() == "failed":
            return f"failed: {p.plugin.errors[0]}"
    # No loader line kept: the version a plugin printed of itself ("aws-ofi-nccl 1.9.1-aws").
    return next((p.plugin.version for p in procs if p.plugin.version), None)


def node_use(host: str, procs: list[NcclProcess], library: str, version: str | None) -> NodeUse:
    """``version``: the log's, for a node whose processes printed none of their own (NCCL 2.4
    prints its banner bare, and one process of many prints it)."""
    transports: Counter[str] = Counter()
    for p in procs:
        transports.update(p.transports())
    # The devices NCCL opened ("NET/IB : Using ..."), not only those a few channel lines name.
    hcas = sorted({d.name for p in procs for d in p.net_devices})
    shown = [p.network_shown() for p in procs]
    layers = sorted({d.link_layer for p in procs for d in p.net_devices})
    return NodeUse(
        host=host,
        ranks=tuple(sorted({p.rank for p in procs if p.rank is not None})),
        library=next((p.library for p in procs if p.library), library),
        versions=tuple(sorted({p.version for p in procs if p.version}))
        or ((version,) if version else ()),
        networks=tuple(sorted({n for n, _ in shown if n})),
        network_inferred=any(n for n, _ in shown) and all(h == "inferred" for n, h in shown if n),
        plugin=_plugin(procs),
        hcas=tuple(hcas),
        link_layers=tuple(layers),
        gdr=_gdr([p.gdr() for p in procs]),
        bootstrap=tuple(sorted({b[0][0] for p in procs if (b := p.bootstrap)})),
        socket_ifs=tuple(sorted({i for p in procs for i, _ in p.socket_ifs})),
        intra=tuple(sorted(t for t in transports if t.startswith(INTRA))),
        inter=tuple(sorted(t for t in transports if not t.startswith(INTRA))),
    )


@dataclass(frozen=True)
class JobUse:
    """Every node's NodeUse, and what they add up to."""

    nodes: tuple[NodeUse, ...]

    def network(self) -> str | None:
        counts = Counter(n for node in self.nodes for n in node.networks)
        return counts.most_common(1)[0][0] if counts else None

    def gdr(self) -> bool | str | None:
        gdr = [n.gdr for n in self.nodes]
        return "partial" if "partial" in gdr else _gdr([g for g in gdr if not isinstance(g, str)])

    def to_json(self) -> dict[str, Any]:
        plugins = sorted({n.plugin for n in self.nodes if n.plugin})
        return {
            "network": self.network(),
            "plugin": plugins[0] if len(plugins) == 1 else (plugins or None),
            "hcas": sorted({h for n in self.nodes for h in n.hcas}),
            "link_layers": sorted({x for n in self.nodes for x in n.link_layers}),
            "gdr": self.gdr(),
            "bootstrap": sorted({b for n in self.nodes for b in n.bootstrap}),
            "intra_node": sorted({t for n in self.nodes for t in n.intra}),
            "nodes": [n.to_json() for n in self.nodes],
        }


def summarise(processes: Iterable[NcclProcess], library: str | None, versions: list[str]) -> JobUse:
    """One NodeUse per host that spoke (processes without a host name group under "?");
    ``versions``: every version the log gave, the one a node without its own takes when only
    one was given."""
    by_host: dict[str, list[NcclProcess]] = {}
    for p in processes:
        by_host.setdefault(p.host or UNKNOWN_HOST, []).append(p)
    only = versions[0] if len(versions) == 1 else None
    return JobUse(tuple(node_use(h, by_host[h], library or "NCCL", only) for h in sorted(by_host)))
