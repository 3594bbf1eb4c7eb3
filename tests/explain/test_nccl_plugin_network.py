"""The network a net plugin's INFO lines name, where no "Using network" line and no channel does
(nccl_lines.plugin_network, NcclProcess.network_shown "plugin").

Written from the sources, not captured (no plugin or fabric here), behind NCCL's logger prefix:
- NCCL (NVIDIA/nccl src/plugin/net/net_v*.cc, 2.19 to 2.30): "NET/Plugin: Loaded net plugin %s
  (v%d)"; src/plugin/net.cc (2.27+) "Initialized NET plugin %s", "Assigned NET plugin %s to
  comm"; graph/topo.cc "NET/%s : GPU Direct RDMA %s for HCA %d '%s'" with the network's name.
- aws-ofi-nccl (src/nccl_ofi_net.cpp, v1.14 to v1.18): NCCL_OFI_INFO prefixes "NET/OFI ":
  "Initializing " PACKAGE_STRING, "Using Libfabric version %u.%u", "Selected provider is %s,
  fabric is %s (found %d nics)", "Using transport protocol %s"; before v1.14 "Selected Provider is
  %s (found %d nics)". Its names for NCCL: "AWS Libfabric", "Libfabric", "OFI".
- nccl-rdma-sharp-plugins (src/p2p_plugin.c): "P2P plugin v8 %s" ("IBext_v8"), before v2.2 "P2P
  plugin %s" ("IBext"), then NCCL's own "NET/IB : Using%s %s; OOB %s:%s" lines.
- Google's gIB plugin, derived from NCCL's IB transport, prints NCCL's IB lines as "NET/gIB".
The other lines of the process are real (tests/fixtures/logs/real/healthy-nccl-*.log).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.explain.test_nccl_job_log import FOREIGN, NCCL_LINES, pasted
from tests.explain.test_nccl_scarce import read

PREFIX = "vm:721:721 [0] NCCL INFO "
# The real process's lines that name its network (Socket, in that capture): left out.
NAMING = ("Using network", "NET plugin", "NET/Socket", "NET/IB", " via ")
QUIET = [
    line for line in NCCL_LINES if line.startswith("vm:721:") and not any(n in line for n in NAMING)
]
PLUGINS = {
    "OFI": [
        "NET/OFI Initializing aws-ofi-nccl 1.14.0",
        "NET/OFI Using Libfabric version 1.22",
        "NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)",
        "NET/OFI Using transport protocol RDMA",
    ],
    "OFI (before v1.14)": ["NET/OFI Selected Provider is efa (found 4 nics)"],
    "Libfabric": [
        "NET/OFI Initializing aws-ofi-nccl 1.16.3",
        "NET/Plugin: Loaded net plugin Libfabric (v10)",
        "NET/OFI Selected provider is efa, fabric is efa (found 32 nics)",
    ],
    "AWS Libfabric": ["NET/AWS Libfabric : GPU Direct RDMA Enabled for HCA 0 'rdmap16s27'"],
    "IBext_v8": [
        "P2P plugin v8 IBext_v8",
        "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.1.0.11<0>",
        "NET/IBext_v8 : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    ],
    "IBext": [
        "P2P plugin IBext",
        "NET/IB : Using [0]mlx5_2:1/RoCE [1]mlx5_3:1/RoCE [RO]; OOB net1:192.168.200.11<0>",
    ],
    "gIB": [
        "Initialized NET plugin gIB",
        "NET/gIB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.1.0.11<0>",
    ],
    "gIB (its lines alone)": [
        "NET/gIB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.1.0.11<0>"
    ],
}


def job(name: str, at: int, foreign: list[tuple[int, str]], extra: list[str]) -> str:
    lines = list(QUIET)
    for where, line in sorted(foreign, key=lambda x: -x[0]):
        lines.insert(min(where, len(lines)), line)
    lines[at:at] = [PREFIX + line for line in PLUGINS[name] + extra]
    return "\n".join(lines) + "\n"


def network(text: str) -> tuple[str | None, str | None]:
    (proc,) = read(text).to_json()["processes"]
    return proc["network"], proc["network_from"]


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(sorted(PLUGINS)),
    at=st.integers(0, len(QUIET)),
    foreign=st.lists(st.tuples(st.integers(0, len(QUIET)), FOREIGN), max_size=10),
)
def test_a_network_only_a_plugin_s_lines_name(
    name: str, at: int, foreign: list[tuple[int, str]]
) -> None:
    text = job(name, at, foreign, [])
    want = name.split(" (")[0]
    # gIB's lines alone list devices under its name: the same network, from them.
    assert network(text) in ((want, "plugin"), (want, "devices"))
    log = pasted(text).log
    assert log is not None and log["network"] == want
    # A line that names the network wins over the plugin's.
    said = job(name, at, foreign, ["Using network IB"])
    assert network(said) == ("IB", "said")


def test_a_plugin_that_fell_back_to_nccl_s_sockets_is_not_the_network() -> None:
    # aws-ofi-nccl started, found no provider, and NCCL's socket transport listed interfaces.
    text = job("OFI (before v1.14)", 0, [], ["NET/Socket : Using [0]eth0:10.1.0.11<0>"])
    assert network(text) == ("Socket", "sockets")


def test_nccl_s_own_networks_and_its_loader_are_no_plugin() -> None:
    for line in (
        "Initialized NET plugin IB",
        "Initialized NET plugin Socket",
        "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",
        "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        "Failed to initialize NET plugin IB",
    ):
        procs = read(PREFIX + line).to_json()["processes"]
        assert all(p["network_from"] != "plugin" for p in procs), line
