"""The shapes of NCCL_DEBUG=INFO lines, every version from 2.4 to today, and RCCL's.

Pure functions over one message; doctor/facts/nccl/log.py keeps what they return. Each shape
was read in NVIDIA/nccl's source at the tags v2.4.8-1, v2.7.8-1, v2.12.12-1, v2.18.3-1, v2.21.5-1
and HEAD (2.30), in the strings of libnccl.so.2 2.32.3, and in ROCm/rccl (rocm-5.7.1, HEAD):
- version: init.cc ``VERSION_STRING``; 2.4 printf()s it bare on stdout ("NCCL version
  2.4.8+cuda10.0", no prefix), later versions also as INFO; RCCL "RCCL version
  2.17.1+hip5.7 <hash>" (ROCm 5) or "RCCL version : 2.20.5-HEAD:<hash>" followed by bare
  "HIP version  :", "ROCm version :" lines.
- links: "Ring %02d : %d -> %d [send] via NET/%s/%d%s" (2.4), "Channel %02d : %d[%lx] -> %d[%lx]
  via P2P/IPC%s" (2.5+), "Channel %02d/%d : ..." (2.12+), "CollNet %02d/%1d : %d [send] via
  COLLNET/%s/%d%s%s" (2.7: "Coll %02d : ..."); "Ring %02d : %d -> %d -> %d" is a ring's order.
- devices: "NET/IB : Using%s ; OOB %s:%s" (2.4), "NET/IB : Using%s %s; OOB %s:%s" (2.7+), entries
  " [%d]%s:%d/%s"; "NET/IB: [%d] %s:%s:%d/%s provider=..." (2.2x); plugins print their own
  ("NET/gIB : Using ...").
- comms: "comm %p rank %d nranks %d cudaDev %d [nvmlDev %d] [busId %lx] ... - Init COMPLETE",
  "ncclCommInitRank comm ...", "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d".
- GDR: "NET/%s : GPU Direct RDMA %s for HCA %d '%s'", "GPU Direct RDMA Enabled for GPU %lx /
  HCA %d (distance %d <= %d), read %d", 2.4's "... for GPU %d[%d] / HCA %d '%s' (no module ...)".
- plugins: "NET/Plugin : No plugin found (libnccl-net.so)", "Plugin load [(%s)] returned %d : %s",
  "NET/Plugin: Could not find: ...", "NET/Plugin: Loaded net plugin %s (v%d)", "Using network %s",
  aws-ofi-nccl's "NET/OFI ..." lines, the HPC-X plugin's "P2P plugin IBext".
- NCCL 2.31+ diagnostics: "%s:%d NCCL DIAG [%s] %s: ..." (NCCL_RUN_DIAGNOSTICS,
  NCCL_RUN_RAS_DIAGNOSTICS); RAS (2.24+): "RAS ..." INFO lines.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from doctor.facts.nccl.world import KEYWORDS as WORLD_KEYWORDS

# A line NCCL (or RCCL, which keeps NCCL's logger) wrote through its logger; group "msg" is the
# message.
MARKER = re.compile(r"\b[NR]CCL (?P<lvl>INFO|WARN|ATTN|TRACE|ERROR|DIAG) (?P<msg>.*)")
# The "host:pid:tid [dev]" just before the marker: behind a prefix strip_prefixes does not know
# (kubectl logs --prefix, a scheduler's) it is still there, and DIAG lines carry "host:pid" alone.
# Only tried on what precedes the marker, and only where strip_prefixes found no host.
ORIGIN = re.compile(
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+)(?::\d+)?(?: \[\d+\])? "
    r"(?:[\w./-]+:\d+(?: \([^)]*\))? )?$"
)
VERSION = re.compile(
    r"\b(?P<lib>NCCL|RCCL) version ?:? ?(?P<ver>\d+\.\d+\.\d+)(?P<suffix>[a-z0-9.]*)"
    r"(?:\+(?P<plat>cuda|hip)(?P<platver>\d+(?:\.\d+)?))?"
)
# RCCL's banner goes on over bare lines: "HIP version  : 6.2.41133-dd7f9",
# "ROCm version : 6.2.0.0-66-8fd0e14", "Librccl path : /opt/rocm/lib/librccl.so.1".
RCCL_EXTRA = re.compile(r"^(?P<what>HIP version|ROCm version|Librccl path)\s*: (?P<value>\S+)")
DRIVER = re.compile(r"cudaDriverVersion (?P<v>\d+)")
BOOTSTRAP = re.compile(r"\bBootstrap ?: Using(?P<rest>.*)")
NET_USING = re.compile(r"\bNET/(?P<net>[^:/]+?) ?: Using(?P<rest>.*)")
NET_DEVICE_LINE = re.compile(r"\bNET/(?P<net>[^:/]+?) ?: ?(?=\[\d+\] ?\S+:(?:uverbs\d+:)?\d+/)")
NO_DEVICE = re.compile(r"\bNET/(?P<net>[^:/]+?) ?: No (?:\w+ )?device")
NO_VERBS = re.compile(r"\b(?:Failed to|Count not|Could not) open libibverbs")
ENDPOINT = re.compile(r"(?:\[\d+\])?(?P<ifname>[^\s:\[\]<>;]+):(?P<addr>[^\s<>]+?)<\d+>")
NET_DEVICE = re.compile(
    r"\[(?P<idx>\d+)\] ?(?P<dev>[^\s:\[\]]+):(?:uverbs\d+:)?(?P<port>\d+)(?::[^/\s]*)?"
    r"/(?P<kind>IB|RoCE|UNSPECIFIED|Ethernet)\b"
)
OOB = re.compile(r";\s*OOB (?P<oob>\S+)")
NETWORK = re.compile(r"\b(?:Using network|Assigned NET plugin) (?P<net>.+?)(?: to comm)?\s*$")
PLUGIN_LOADED = re.compile(
    r"\bLoaded (?P<kind>net|collnet|coll) plugin (?P<name>.+?)(?: \((?P<api>v\d+)\))?\s*$"
)
PLUGIN_ABSENT = re.compile(
    r"\bNET/Plugin ?: ?(?:No plugin found|Could not find|.*cannot open shared object file)"
)
PLUGIN_LOAD_ERROR = re.compile(
    r"\bNET/Plugin ?: ?(?:Plugin load (?:\((?P<path>[^)]*)\) )?returned (?P<errno>\d+) ?: ?"
    r"(?P<err>.*?)|(?P<failed>Failed to .*?)|dlerror=(?P<dlerr>.*?))\.?\s*$"
)
PLUGIN_NETWORK_MISSING = re.compile(r"\bError: network (?P<net>.+?) not found")
PLUGIN_PATH = re.compile(r"\b(?:Plugin Path|Plugin name set by env to) ?:? ?(?P<path>\S+\.so\S*)")
HPCX_PLUGIN = re.compile(r"\bP2P plugin (?:v\d+ )?(?P<name>\S+)")
OFI_VERSION = re.compile(
    r"\bNET/OFI (?:Using|Initializing) (?P<name>aws-ofi-nccl|\S*ofi\S*) ?(?P<ver>\S*)"
)
OFI_PROVIDER = re.compile(
    r"\bNET/OFI Selected [Pp]rovider is (?P<prov>[^\s,]+)(?:, fabric is (?P<fabric>[^\s,]+))?"
    r"(?: \(found (?P<nics>\d+) nics?\))?"
)
PLUGIN_VERSION = re.compile(r"\bNET/(?P<name>\w+) ver\. ?(?P<ver>[\w.-]+?)\.?\s*$")
GDR = re.compile(
    r"\bGPU ?Direct ?RDMA (?:\((?P<how>[^)]*)\) )?(?P<state>[Ee]nabled|[Dd]isabled) for "
    r"(?:GPU (?P<gpu>[\w\[\]]+) / )?HCA (?P<hca>\w+)(?: '(?P<name>[^']*)')?(?: \((?P<why>[^)]*)\))?"
)
DMABUF = re.compile(r"\bDMA-BUF is available on GPU device")
RING_GDR = re.compile(r"\bConnected all rings.*\bGDR (?P<gdr>\d)")
COMM = re.compile(
    r"\bcomm (?P<comm>\S+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
    r"(?: nNodes (?P<nnodes>\d+) localRanks (?P<local>\d+) localRank (?P<localrank>\d+))?"
    r"(?: cudaDev (?P<dev>-?\d+))?(?: nvmlDev (?P<nvml>-?\d+))?(?: busId (?P<bus>[0-9a-fA-F]+))?"
    r"(?:.* - (?P<state>Init COMPLETE|Init START|Destroy COMPLETE|Abort COMPLETE))?"
)
LINK = re.compile(
    r"\b(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)(?:\[[^\]]*\])? -> (?P<dst>\d+)"
    r"(?:\[[^\]]*\])? (?:\[(?P<dir>send|receive)\] )?via (?P<via>.+?)\s*$"
)
COLLNET_LINK = re.compile(
    r"\b(?:CollNet|Coll) (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+) \[(?P<dir>send|receive)\] "
    r"via (?P<via>.+?)\s*$"
)
NVLS = re.compile(r"\bNVLS comm |\bConnected NVLS\b|\bNVLS multicast support is available")
ENV = re.compile(
    r"\b(?P<name>[NR]CCL_[A-Z0-9_]+) set (?:by environment |from \S+ )?to (?P<value>.*?)\.?\s*$"
)
DIAG = re.compile(r"^(?:\[(?P<status>[A-Z]+)\] |(?P<word>INFO|WARN|FAIL) )?(?P<text>.*)$")
RAS = re.compile(r"^RAS ")

# Where no "Using network" line is left, the network a WARN line's source file or subsystem
# names: NCCL's transport/net_ib.cc (transport/net_ib/*.cc from 2.23) and net_socket.cc; the
# HPC-X plugin's ib_plugin.c and p2p_plugin.c (IB verbs), ucx_plugin.c; aws-ofi-nccl's
# nccl_ofi_*.c; else the message's own "NET/<name> :" ("NET/IB : Got completion from peer").
NET_FILES = (
    ("net_ib", "IB"),
    ("ib_plugin", "IB"),
    ("p2p_plugin", "IB"),
    ("ucx_plugin", "UCX"),
    ("net_socket", "Socket"),
    ("nccl_ofi", "OFI"),
)
NET_SUBSYSTEM = re.compile(r"^NET/(?P<net>(?!Plugin\b)[A-Za-z]\w*)(?: ?:| )")


def network_hint(src: str | None, msg: str) -> str | None:
    """The network a WARN line's source file or subsystem names (None: neither does)."""
    if src:
        for part, net in NET_FILES:
            if part in src:
                return net
    m = NET_SUBSYSTEM.match(msg)
    return m["net"] if m is not None else None


# Where no "Using network" line and no channel names the network, the one a net plugin's INFO
# lines name, by how surely (NcclProcess.network_shown, "plugin"): 3, what NCCL says it loaded or
# initialised (plugin/net*.cc "NET/Plugin: Loaded net plugin %s (v%d)", 2.27+ "Initialized NET
# plugin %s"); 2, the name its GPU Direct RDMA line gives the network in use (graph/topo.cc
# "NET/%s : GPU Direct RDMA %s for HCA %d '%s'"); 1, the HPC-X plugin's own name
# (nccl-rdma-sharp-plugins p2p_plugin.c "P2P plugin [v%d ]%s": IBext, IBext_v8); 0, a plugin's
# subsystem in its own lines (aws-ofi-nccl's NCCL_OFI_INFO "NET/OFI ...", "NET/gIB : ...").
# NCCL's own IB and Socket are no plugin (the HPC-X plugin prints NCCL's "NET/IB : Using" lines),
# nor is NCCL's plugin loader, "NET/Plugin".
PLUGIN_NETS = (
    re.compile(r"\b(?:Loaded net plugin|Initialized NET plugin) (?P<net>.+?)(?: \(v\d+\))?\s*$"),
    re.compile(r"^NET/(?P<net>[^:/]+?) ?: GPU ?Direct ?RDMA "),
    re.compile(r"\bP2P plugin (?:v\d+ )?(?P<net>\S+)"),
    re.compile(r"^NET/(?P<net>[A-Za-z][\w.-]*)(?=[ :])"),
)
NOT_PLUGINS = frozenset({"IB", "Socket", "Plugin"})


def plugin_network(msg: str) -> tuple[int, str] | None:
    """(how surely, the network) a net plugin's INFO line names; None: it names none."""
    if not msg.startswith("NET/") and "lugin " not in msg:  # most lines: no regex at all
        return None
    for surely, regex in zip(range(len(PLUGIN_NETS) - 1, -1, -1), PLUGIN_NETS, strict=True):
        if (m := regex.search(msg)) is not None:
            net = m["net"].strip()
            return None if net in NOT_PLUGINS else (surely, net)
    return None


# Literal text every line read above contains: the explain engine hands only lines holding one
# of these to the reader (a keyword pass over the whole log is what keeps it fast).
KEYWORDS = (
    "nccl-tests version",  # nccl-tests' and rccl-tests' headers (nccl_tests.py)
    "rccl-tests: Version",
    "device",  # their rank lines ("Pid %6d on %10s device %2d"): an anchor other keywords need
    "NCCL version",
    "RCCL version",
    "HIP version",
    "ROCm version",
    "Librccl path",
    "CCL INFO",
    "CCL WARN",
    "CCL DIAG",
    *WORLD_KEYWORDS,  # a launcher's or framework's count of ranks (world.py)
)


class NetDevice(NamedTuple):
    """One device a network said it uses: index, name, port and link layer (IB, RoCE)."""

    number: int  # NCCL's device index, as its NET/<net>/<n> links name it
    name: str
    port: int
    link_layer: str


class Link(NamedTuple):
    """One channel connection a rank set up."""

    transport: str  # NET/IB, NET/IB/GDRDMA, P2P/IPC, SHM, CollNet/IB, ...
    net_device: int | None  # the index into the network's devices, for NET links


def endpoints(text: str) -> list[tuple[str, str]]:
    """(interface, address) pairs of a "Bootstrap : Using" or "NET/Socket : Using" list."""
    return [(e["ifname"], e["addr"]) for e in ENDPOINT.finditer(text)]


def net_devices(text: str) -> list[NetDevice]:
    return [
        NetDevice(int(m["idx"]), m["dev"], int(m["port"]), m["kind"])
        for m in NET_DEVICE.finditer(text)
    ]


_NET_VIA = re.compile(r"NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\(\d+\))?(?P<rest>.*)")


def link(via: str) -> Link:
    """A channel's ``via`` text as a Link."""
    if (m := _NET_VIA.match(via)) is not None:
        gdr = "/GDRDMA" if "/GDRDMA" in m["rest"] else ""
        return Link(f"NET/{m['net']}{gdr}", int(m["dev"]))
    return Link(transport_name(via), None)


def transport_name(via: str) -> str:
    """A channel's ``via`` text as its transport: NET/IB/GDRDMA, NET/Socket, P2P/CUMEM, SHM."""
    if (m := _NET_VIA.match(via)) is not None:
        return f"NET/{m['net']}/GDRDMA" if "/GDRDMA" in m["rest"] else f"NET/{m['net']}"
    if via.startswith("NET/"):
        return f"NET/{via.split('/')[1]}"
    if via.startswith("P2P/"):
        return f"P2P/{via[4:].split('/')[0]}"
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    if via.upper().startswith("COLLNET/"):
        return f"CollNet/{via.split('/')[1]}"
    return via.split()[0] if via.split() else via
