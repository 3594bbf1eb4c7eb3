"""Read NCCL_DEBUG=INFO output into facts: version, ranks, interfaces, transports per channel.

Pure functions over text; no I/O. Formats follow NVIDIA/nccl (see technical-notes §3.2):
init.cc (version, "comm %p rank %d nRanks %d nNodes %d ..."), bootstrap.cc ("Bootstrap: Using"),
transport/net_socket.cc ("NET/Socket : Using [%d]%s:%s"), transport/net_ib/init.cc
("NET/IB : Using [%d]%s:%d/%s"), transport/{p2p,shm,net}.cc ("Channel %02d/%d : %d[%d] -> %d[%d]
... via ...").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor.explain.prefix import strip_prefixes

# Literal text that every line this module reads contains: callers may skip lines without any.
KEYWORDS = (
    "NCCL version",
    "cudaDriverVersion",
    "Bootstrap",
    "NET/",
    " via ",
    "nRanks",
    "nranks",
    "Using network",
    "set by environment to",
    "Init COMPLETE",
)
# Bounds that keep memory flat on a 10,000-rank log (or garbage that looks like one).
MAX_PROCESSES = 1024
MAX_LINKS = 256  # channel connections remembered per process
MAX_ENV = 64

_NCCL = re.compile(r"NCCL (?:INFO|WARN|ATTN|TRACE) (?P<msg>.*)")
_VERSION = re.compile(
    r"NCCL version (?P<ver>\d+\.\d+\.\d+)(?P<suffix>\S*?)\+cuda(?P<cuda>\d+\.\d+)"
)
_DRIVER = re.compile(r"cudaDriverVersion (?P<v>\d+)")
_ENDPOINT = re.compile(r"(?:\[\d+\])?(?P<ifname>[^:\s\[\]]+):(?P<addr>\S+?)<\d+>")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using(?P<rest>.*)")
_SOCKET = re.compile(r"NET/Socket ?: Using(?P<rest>.*)")
_IB = re.compile(r"NET/IB ?: Using(?P<rest>.*?)(?:; OOB (?P<oob>\S+))?\s*$")
_IB_DEV = re.compile(
    r"\[\d+\](?P<dev>[^:\s]+):(?P<port>\d+)(?::[^/\s]*)?/(?P<kind>IB|RoCE|UNSPECIFIED)"
)
_NETWORK = re.compile(r"Using network (?P<net>\S+)")
_COMM = re.compile(
    r"rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<local>\d+) localRank (?P<localrank>\d+)"
)
_OLD_COMM = re.compile(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)")
_CHANNEL = re.compile(
    r"Channel (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)\[\w+\] -> (?P<dst>\d+)\[\w+\] "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<via>.+?)\s*$"
)
_ENV = re.compile(r"(?P<name>NCCL_\w+) set by environment to (?P<value>.*?)\.?\s*$")


def transport_name(via: str) -> str:
    """A channel's ``via`` text as its transport: NET/IB/GDRDMA, NET/Socket, P2P/CUMEM, SHM."""
    if via.startswith("NET/"):
        net = via.split("/")[1]
        return f"NET/{net}/GDRDMA" if "/GDRDMA" in via else f"NET/{net}"
    if via.startswith("P2P/"):
        kind = via[4:].split("/")[0]
        return f"P2P/{kind}"
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    return via.split()[0]


@dataclass
class NcclProcess:
    """What one NCCL process (host, pid) said about itself."""

    host: str | None
    pid: int | None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    bootstrap: list[tuple[str, str]] = field(default_factory=list)  # (interface, address)
    socket_ifs: list[tuple[str, str]] = field(default_factory=list)
    ib_devices: list[tuple[str, int, str]] = field(default_factory=list)  # (hca, port, IB|RoCE)
    ib_oob: str | None = None
    network: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # (channel, src rank, dst rank, direction) -> transport
    links: dict[tuple[int, int, int, str], str] = field(default_factory=dict)
    init_complete: bool = False

    def absorb(self, later: NcclProcess) -> None:
        """Take in what the same process said later in the log (a parallel scan's next part):
        what it said last wins, as when one scanner reads it all."""
        if later.nranks is not None:  # a comm line: it sets the rank outright
            self.rank, self.nranks = later.rank, later.nranks
            self.nnodes = later.nnodes if later.nnodes is not None else self.nnodes
            self.local_ranks = (
                later.local_ranks if later.local_ranks is not None else self.local_ranks
            )
        elif self.rank is None:
            self.rank = later.rank
        self.bootstrap = later.bootstrap or self.bootstrap
        self.socket_ifs = later.socket_ifs or self.socket_ifs
        if later.ib_devices or later.ib_oob is not None:
            self.ib_devices, self.ib_oob = later.ib_devices, later.ib_oob
        self.network = later.network or self.network
        for name, value in later.env.items():
            if name in self.env or len(self.env) < MAX_ENV:
                self.env[name] = value
        for link, transport in later.links.items():
            if link in self.links or len(self.links) < MAX_LINKS:
                self.links[link] = transport
        self.init_complete = self.init_complete or later.init_complete

    def transports(self) -> dict[str, int]:
        """How many channel connections used each transport."""
        counts: dict[str, int] = {}
        for t in self.links.values():
            counts[t] = counts.get(t, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "rank": self.rank,
            "nranks": self.nranks,
            "nnodes": self.nnodes,
            "local_ranks": self.local_ranks,
            "bootstrap": [f"{i}:{a}" for i, a in self.bootstrap],
            "socket_interfaces": [f"{i}:{a}" for i, a in self.socket_ifs],
            "ib_devices": [f"{d}:{p}/{k}" for d, p, k in self.ib_devices],
            "network": self.network,
            "transports": self.transports(),
            "env": dict(sorted(self.env.items())),
            "init_complete": self.init_complete,
        }


@dataclass
class NcclLog:
    """Facts accumulated from NCCL lines, fed one message at a time (streaming)."""

    version: str | None = None
    cuda: str | None = None
    cuda_driver: int | None = None
    processes: dict[tuple[str | None, int | None], NcclProcess] = field(default_factory=dict)
    processes_dropped: int = 0  # lines from processes beyond MAX_PROCESSES

    def feed(self, text: str, host: str | None = None, pid: int | None = None) -> bool:
        """Read one line (launcher prefixes stripped); True when it told us something."""
        m = _NCCL.search(text)
        if m is None:
            return False
        msg = m.group("msg")
        if (v := _VERSION.search(msg)) is not None:
            self.version = v.group("ver") + v.group("suffix")
            self.cuda = v.group("cuda")
            return True
        if (d := _DRIVER.search(msg)) is not None:
            self.cuda_driver = int(d.group("v"))
            return True
        key = (host, pid)
        proc = self.processes.get(key)
        if proc is None:
            if len(self.processes) >= MAX_PROCESSES:
                self.processes_dropped += 1
                return False
            proc = NcclProcess(host, pid)
        if not self._feed_process(msg, proc):
            return False
        self.processes[key] = proc  # only processes that told us something are kept
        return True

    def _feed_process(self, msg: str, proc: NcclProcess) -> bool:
        if (c := _CHANNEL.search(msg)) is not None:
            if len(proc.links) < MAX_LINKS:
                key = (
                    int(c.group("ch")),
                    int(c.group("src")),
                    int(c.group("dst")),
                    c.group("dir") or "",
                )
                proc.links[key] = transport_name(c.group("via"))
            if proc.rank is None:
                proc.rank = int(c.group("src")) if c.group("dir") != "receive" else None
            return True
        if (b := _BOOTSTRAP.search(msg)) is not None:
            proc.bootstrap = [(e["ifname"], e["addr"]) for e in _ENDPOINT.finditer(b["rest"])]
            return True
        if (s := _SOCKET.search(msg)) is not None:
            proc.socket_ifs = [(e["ifname"], e["addr"]) for e in _ENDPOINT.finditer(s["rest"])]
            return True
        if (i := _IB.search(msg)) is not None:
            proc.ib_devices = [
                (e["dev"], int(e["port"]), e["kind"]) for e in _IB_DEV.finditer(i["rest"])
            ]
            proc.ib_oob = i["oob"]
            return True
        if (n := _NETWORK.search(msg)) is not None:
            proc.network = n.group("net")
            return True
        if (c2 := _COMM.search(msg)) is not None:
            proc.rank, proc.nranks = int(c2["rank"]), int(c2["nranks"])
            proc.nnodes, proc.local_ranks = int(c2["nnodes"]), int(c2["local"])
            return True
        if (o := _OLD_COMM.search(msg)) is not None:
            proc.rank, proc.nranks = int(o["rank"]), int(o["nranks"])
            proc.init_complete = proc.init_complete or "Init COMPLETE" in msg
            return True
        if "Init COMPLETE" in msg:
            proc.init_complete = True
            return True
        if (e := _ENV.search(msg)) is not None:
            if e["name"] in proc.env or len(proc.env) < MAX_ENV:
                proc.env[e["name"]] = e["value"]
            return True
        return False

    def absorb(self, later: NcclLog) -> None:
        """Take in what the next part of a log (scanned in parallel) said."""
        self.version = later.version or self.version
        self.cuda = later.cuda or self.cuda
        self.cuda_driver = later.cuda_driver if later.cuda_driver is not None else self.cuda_driver
        for key, proc in later.processes.items():
            if key in self.processes:
                self.processes[key].absorb(proc)
            elif len(self.processes) < MAX_PROCESSES:
                self.processes[key] = proc
            else:
                self.processes_dropped += 1
        self.processes_dropped += later.processes_dropped

    def nnodes(self) -> int | None:
        """The node count NCCL computed (the largest any process reported)."""
        counts = [p.nnodes for p in self.processes.values() if p.nnodes is not None]
        return max(counts) if counts else None

    def transports(self) -> dict[str, int]:
        """Channel connections per transport, over every process."""
        total: dict[str, int] = {}
        for p in self.processes.values():
            for t, n in p.transports().items():
                total[t] = total.get(t, 0) + n
        return total

    def is_empty(self) -> bool:
        return self.version is None and self.cuda_driver is None and not self.processes

    def to_json(self) -> dict[str, Any]:
        procs = sorted(
            self.processes.values(),
            key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.host or "", p.pid or 0),
        )
        return {
            "version": self.version,
            "cuda": self.cuda,
            "cuda_driver": self.cuda_driver,
            "nnodes": self.nnodes(),
            "transports": self.transports(),
            "processes": [p.to_json() for p in procs],
            "processes_dropped": self.processes_dropped,
        }


def parse_nccl_log(lines: Iterable[str]) -> NcclLog:
    """Parse a whole NCCL_DEBUG=INFO log (launcher prefixes allowed) into NcclLog."""
    log = NcclLog()
    for line in lines:
        text, origin = strip_prefixes(line.rstrip("\n"))
        log.feed(text, origin.host, origin.pid)
    return log
