"""One NCCL process as its log lines describe it (doctor/facts/nccl/log.py fills it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from doctor.facts.nccl.lines import Link, NetDevice

MAX_LINKS = 256  # channel connections remembered per process
MAX_ENV = 64
MAX_DEVICES = 64
MAX_NOTES = 16  # plugin errors, diagnostics lines per process
MAX_TEXT = 200  # characters kept of a free-text value (an error, a path)


def cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@dataclass
class Plugin:
    """What a process said about its network plugin."""

    name: str | None = None  # "AWS Libfabric", "IBext", "NCCL RDMA Plugin v8", "gIB"
    api: str | None = None  # "v8"
    version: str | None = None  # "1.9.1-aws" (aws-ofi-nccl), "3.1.8" (GPUDirectTCPX)
    path: str | None = None
    loaded: bool = False
    absent: bool = False  # "No plugin found" / "Could not find" / ENOENT
    errors: list[str] = field(default_factory=list)  # load failures other than "not there"
    provider: str | None = None  # aws-ofi-nccl: libfabric provider (efa) and fabric
    nics: int | None = None

    def status(self) -> str | None:
        """loaded, failed, none (searched and not there), or None (the log says nothing)."""
        if self.loaded or self.name:
            return "loaded"
        if self.errors:
            return "failed"
        return "none" if self.absent else None

    def note_error(self, text: str) -> None:
        if text not in self.errors and len(self.errors) < MAX_NOTES:
            self.errors.append(text)

    def absorb(self, later: Plugin) -> None:
        for name in ("name", "api", "version", "path", "provider", "nics"):
            if getattr(later, name) is not None:
                setattr(self, name, getattr(later, name))
        self.loaded = self.loaded or later.loaded
        self.absent = self.absent or later.absent
        for e in later.errors:
            self.note_error(e)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status(),
            "name": self.name,
            "api": self.api,
            "version": self.version,
            "path": self.path,
            "errors": list(self.errors),
            "provider": self.provider,
            "nics": self.nics,
        }


@dataclass
class NcclProcess:
    """What one NCCL process (host, pid) said about itself."""

    host: str | None
    pid: int | None
    library: str | None = None  # NCCL or RCCL
    version: str | None = None
    cuda: str | None = None  # the CUDA (or HIP) the library was built for
    cuda_driver: int | None = None
    # Of the communicator with the most ranks (the job's world): a process may sit in several.
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    bootstrap: list[tuple[str, str]] = field(default_factory=list)  # (interface, address)
    socket_ifs: list[tuple[str, str]] = field(default_factory=list)
    net_devices: list[NetDevice] = field(default_factory=list)
    net_devices_of: str | None = None  # the network that listed them (IB, gIB, ...)
    no_devices: list[str] = field(default_factory=list)  # networks that found none (IB)
    no_verbs: bool = False  # libibverbs could not be opened
    ib_oob: str | None = None
    network: str | None = None  # "Using network ..."
    # (how surely, the network) a net plugin's INFO lines name (nccl_lines.plugin_network)
    plugin_net: tuple[int, str] | None = None
    # Networks its WARN lines' source files and subsystems name (net_ib.cc, "NET/IB :"): the
    # network inferred where nothing else names one.
    net_hints: Counter[str] = field(default_factory=Counter)
    plugin: Plugin = field(default_factory=Plugin)
    gdr_hcas: dict[str, str] = field(default_factory=dict)  # HCA -> "enabled" / "disabled (why)"
    dmabuf: bool = False
    ring_gdr: bool | None = None  # "Connected all rings, use ring PXN %d GDR %d"
    env: dict[str, str] = field(default_factory=dict)
    links: dict[tuple[int, int, int, str], Link] = field(default_factory=dict)
    nvls: bool = False
    init_complete: bool = False
    aborted: bool = False
    ras: bool = False  # the RAS subsystem (NCCL 2.24+) spoke
    diagnostics: list[tuple[str, str]] = field(default_factory=list)  # (status, text), 2.31+

    @property
    def ib_devices(self) -> list[tuple[str, int, str]]:
        """(HCA, port, IB|RoCE) of the devices NCCL's IB network (or a plugin) said it uses."""
        return [(d.name, d.port, d.link_layer) for d in self.net_devices]

    def transports(self) -> dict[str, int]:
        """How many channel connections used each transport."""
        return dict(Counter(link.transport for link in self.links.values()))

    def used_network(self) -> str | None:
        """The network between nodes: "Using network", else the links', else the devices'."""
        return self.network_shown()[0]

    def network_shown(self) -> tuple[str | None, str | None]:
        """The network and how the log showed it: "said" ("Using network", "Assigned NET
        plugin"), "channels" (their NET/<name>), "plugin" (the net plugin NCCL loaded, or named
        in its GPU Direct RDMA line; else, below the devices, a plugin's own INFO lines where
        NCCL's socket transport did not list interfaces: the plugin's failure made it fall
        back), or only guessed from what the process listed: "devices" (a plugin prints NCCL's
        "NET/IB : Using" lines under its own name), "inferred" (from the source files and
        subsystems of its WARN lines), "sockets" (the interfaces NCCL's socket transport
        listed). Only the first two are the network's own name, which ranks can be held to."""
        if self.network:
            return self.network, "said"
        nets = [t.split("/")[1] for t in self.transports() if t.startswith("NET/")]
        if nets:
            return Counter(nets).most_common(1)[0][0], "channels"
        plugin = self.plugin_net
        if plugin is not None and plugin[0] > 0:
            return plugin[1], "plugin"
        if self.net_devices_of:
            return self.net_devices_of, "devices"
        if plugin is not None and not self.socket_ifs:
            return plugin[1], "plugin"
        if self.net_hints:
            return self.net_hints.most_common(1)[0][0], "inferred"
        return ("Socket", "sockets") if self.socket_ifs else (None, None)

    def gdr(self) -> bool | None:
        """Whether GPUDirect RDMA carried its RDMA channels (None: none, or sockets only)."""
        net = [t.transport for t in self.links.values() if t.transport.startswith("NET/")]
        if (net and all(t == "NET/Socket" for t in net)) or self.used_network() == "Socket":
            return None  # GPUDirect RDMA is not a question on sockets
        if net:
            return any(t.endswith("/GDRDMA") for t in net)
        if self.ring_gdr is not None:
            return self.ring_gdr
        states = set(self.gdr_hcas.values())
        if states:
            return any(s == "enabled" for s in states)
        return None

    def note_plugin_net(self, named: tuple[int, str] | None) -> None:
        """Keep the surest network a plugin's lines named (the first, of equally sure ones)."""
        if named is not None and (self.plugin_net is None or named[0] > self.plugin_net[0]):
            self.plugin_net = named

    def absorb(self, later: NcclProcess) -> None:
        """Take in what the same process said later in the log (a parallel scan's next part):
        what it said last wins, as when one scanner reads it all."""
        if later.nranks is not None and (self.nranks is None or later.nranks >= self.nranks):
            self.rank, self.nranks = later.rank, later.nranks
            self.cuda_dev = later.cuda_dev if later.cuda_dev is not None else self.cuda_dev
            self.bus_id = later.bus_id or self.bus_id
        elif self.rank is None:
            self.rank = later.rank
        for name in ("nnodes", "local_ranks", "cuda_driver", "ring_gdr"):
            if getattr(later, name) is not None:
                setattr(self, name, getattr(later, name))
        for name in ("library", "version", "cuda", "ib_oob", "network", "net_devices_of"):
            setattr(self, name, getattr(later, name) or getattr(self, name))
        self.bootstrap = later.bootstrap or self.bootstrap
        self.socket_ifs = later.socket_ifs or self.socket_ifs
        self.net_devices = later.net_devices or self.net_devices
        self.no_devices = sorted(set(self.no_devices) | set(later.no_devices))
        self.net_hints.update(later.net_hints)
        self.plugin.absorb(later.plugin)
        self.note_plugin_net(later.plugin_net)
        _bounded_update(self.gdr_hcas, later.gdr_hcas, MAX_DEVICES)
        _bounded_update(self.env, later.env, MAX_ENV)
        _bounded_update(self.links, later.links, MAX_LINKS)
        for note in later.diagnostics:
            if note not in self.diagnostics and len(self.diagnostics) < MAX_NOTES:
                self.diagnostics.append(note)
        for flag in ("no_verbs", "dmabuf", "nvls", "init_complete", "aborted", "ras"):
            setattr(self, flag, getattr(self, flag) or getattr(later, flag))

    def to_json(self) -> dict[str, Any]:
        network, network_from = self.network_shown()
        return {
            "host": self.host,
            "pid": self.pid,
            "library": self.library,
            "version": self.version,
            "cuda": self.cuda,
            "rank": self.rank,
            "nranks": self.nranks,
            "nnodes": self.nnodes,
            "local_ranks": self.local_ranks,
            "cuda_dev": self.cuda_dev,
            "bus_id": self.bus_id,
            "bootstrap": [f"{i}:{a}" for i, a in self.bootstrap],
            "socket_interfaces": [f"{i}:{a}" for i, a in self.socket_ifs],
            "network": network,
            "network_from": network_from,
            "plugin": self.plugin.to_json(),
            "hcas": [
                {"name": d.name, "port": d.port, "link_layer": d.link_layer}
                for d in self.net_devices
            ],
            "ib_devices": [f"{d}:{p}/{k}" for d, p, k in self.ib_devices],
            "no_devices": list(self.no_devices),
            "libibverbs_missing": self.no_verbs,
            "gdr": self.gdr(),
            "gdr_hcas": dict(self.gdr_hcas),
            "dmabuf": self.dmabuf,
            "transports": self.transports(),
            "nvls": self.nvls,
            "env": dict(sorted(self.env.items())),
            "init_complete": self.init_complete,
            "aborted": self.aborted,
            "ras": self.ras,
            "diagnostics": [{"status": s, "text": t} for s, t in self.diagnostics],
        }


def _bounded_update(into: dict[Any, Any], more: dict[Any, Any], most: int) -> None:
    for key, value in more.items():
        if key in into or len(into) < most:
            into[key] = value
