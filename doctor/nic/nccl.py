"""NCCL's interface choice, replayed over a node's getifaddrs() list (src/misc/socket.cc,
src/os/linux.cc, src/bootstrap.cc), and what the real library said (its unique id and log)."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from doctor.facts.network.net import AF_INET, AF_INET6, IFF_RUNNING, IfAddr, NetFacts
from doctor.facts.network.rdma import RdmaFacts
from doctor.nic.config import Setting
from doctor.nic.grammar import NcclList, nccl_list_active, parse_nccl_list

Version = tuple[int, int, int]
# 2.28.3: only IFF_RUNNING interfaces; virbr* moved behind docker* and lo*.
RUNNING_AND_VIRBR = (2, 28, 3)
SOCKET_MAX_IFS = 16  # MAX_IFS in src/include/socket.h


@dataclass(frozen=True)
class Selection:
    """What NCCL picks: the interfaces in order (bootstrap uses the first), how, or why none."""

    interfaces: tuple[IfAddr, ...]
    rule: str  # which step of the algorithm chose them
    error: str | None = None  # the WARN NCCL would print when nothing is found

    @property
    def first(self) -> IfAddr | None:
        return self.interfaces[0] if self.interfaces else None


def socket_family(value: str | None) -> int | None:
    """ncclEnvSocketFamily(): exactly AF_INET or AF_INET6 forces a family; anything else doesn't."""
    return {"AF_INET": AF_INET, "AF_INET6": AF_INET6}.get(value or "")


def find_interfaces(
    ifaddrs: tuple[IfAddr, ...],
    wanted: NcclList,
    family: int | None,
    version: Version | None,
    max_ifs: int,
) -> list[IfAddr]:
    """ncclOsFindInterfaces(): first address of each matching interface, in getifaddrs order."""
    running_only = version is None or version >= RUNNING_AND_VIRBR
    found: list[IfAddr] = []
    for a in ifaddrs:
        if len(found) >= max_ifs:
            break
        if running_only and not a.flags & IFF_RUNNING:
            continue
        if family is not None and a.family != family:
            continue
        if a.family == AF_INET6 and a.loopback:
            continue
        if not wanted.matches(a.name) or any(f.name == a.name for f in found):
            continue
        found.append(a)
    return found


@dataclass(frozen=True)
class CommId:
    host: str
    port: int
    scope_ifname: str | None = None


def parse_comm_id(text: str) -> CommId | None:
    """NCCL_COMM_ID: '<ipv4 or host>:<port>' or '[<ipv6>[%if]]:<port>'; None when unusable."""
    if text.startswith("["):
        inner, sep, port = text[1:].partition("]")
        if not sep:
            return None
        host, _, scope = inner.partition("%")
        return CommId(host, _port(port.lstrip(":")), scope or None)
    host, _, port = text.partition(":")
    return CommId(host, _port(port)) if host else None


def _port(text: str) -> int:
    return int(text) if text.isdigit() else 0


def match_subnet(ifaddrs: tuple[IfAddr, ...], remote: str, scope_id: int = 0) -> IfAddr | None:
    """ncclFindInterfaceMatchSubnet(): first address whose own netmask covers the remote one.

    No IFF_RUNNING test and no name filter here: even lo qualifies for a 127.x id.
    """
    ip = ipaddress.ip_address(remote)
    for a in ifaddrs:
        if a.family != (AF_INET if ip.version == 4 else AF_INET6):
            continue
        if ip in a.network and (a.family == AF_INET or a.scope_id == scope_id):
            return a
    return None


def _comm_id_address(comm: CommId, net: NetFacts) -> tuple[str, int] | None:
    try:
        ipaddress.ip_address(comm.host)
    except ValueError:
        # A hostname: NCCL resolves it. We know only what this node's own name resolves to.
        resolved = net.hostname_addrs
        if comm.host == net.hostname and isinstance(resolved, tuple) and resolved:
            return resolved[0].address, 0
        return None
    scope = 0
    if comm.scope_ifname:
        iface = net.interfaces.get(comm.scope_ifname)
        scope = iface.ifindex or 0 if iface else 0
    return comm.host, scope


def select(
    net: NetFacts,
    settings: dict[str, Setting],
    version: Version | None,
    *,
    bootstrap: bool,
) -> Selection:
    """The bootstrap interface (bootstrap=True, first match) or the NET/Socket list (up to 16)."""
    family = socket_family(_value(settings, "NCCL_SOCKET_FAMILY"))
    max_ifs = 1 if bootstrap else SOCKET_MAX_IFS
    comm_text = _value(settings, "NCCL_COMM_ID")
    if bootstrap and comm_text is not None:
        # bootstrapNetInit(): with NCCL_COMM_ID the subnet match replaces everything else.
        return _comm_id_selection(net, comm_text)
    ifname = _value(settings, "NCCL_SOCKET_IFNAME")
    if nccl_list_active(ifname):
        assert ifname is not None
        found = find_interfaces(net.ifaddrs, parse_nccl_list(ifname), family, version, max_ifs)
        rule = f"NCCL_SOCKET_IFNAME={ifname}"
        return Selection(tuple(found), rule, None if found else _none_error(bootstrap))
    # ncclFindInterfaces(): IPoIB first; then the NCCL_COMM_ID subnet; then the rest in order.
    found = find_interfaces(net.ifaddrs, parse_nccl_list("ib"), family, version, max_ifs)
    if found:
        return Selection(tuple(found), "names starting with ib (IPoIB first)")
    if comm_text and len(comm_text) > 1:
        comm = _comm_id_selection(net, comm_text)
        if comm.interfaces:
            return comm
    new = version is None or version >= RUNNING_AND_VIRBR
    auto = "^docker,lo,virbr" if new else "^docker,lo"
    steps = [(auto, f"automatic ({auto})"), ("docker", "docker* fallback"), ("lo", "lo fallback")]
    if new:
        steps.append(("virbr", "virbr* fallback"))
    for spec, rule in steps:
        found = find_interfaces(net.ifaddrs, parse_nccl_list(spec), family, version, max_ifs)
        if found:
            return Selection(tuple(found), rule)
    return Selection((), "automatic", _none_error(bootstrap))


def _comm_id_selection(net: NetFacts, text: str) -> Selection:
    comm = parse_comm_id(text)
    if comm is None:
        return Selection((), "NCCL_COMM_ID", "Invalid NCCL_COMM_ID")
    target = _comm_id_address(comm, net)
    if target is None:
        return Selection((), "NCCL_COMM_ID", f"cannot resolve {comm.host} here to predict")
    hit = match_subnet(net.ifaddrs, *target)
    rule = f"NCCL_COMM_ID subnet of {target[0]}"
    if hit is None:
        return Selection((), rule, "No interface found in the same subnet as remote address")
    return Selection((hit,), rule)


def _none_error(bootstrap: bool) -> str:
    return (
        "Bootstrap : no socket interface found" if bootstrap else "NET/Socket : no interface found"
    )


def _value(settings: dict[str, Setting], name: str) -> str | None:
    s = settings.get(name)
    return s.value if s else None


@dataclass(frozen=True)
class IbPort:
    hca: str
    port: int
    transport: str  # IB or RoCE
    rate_gbps: float | None


@dataclass(frozen=True)
class IbChoice:
    ports: tuple[IbPort, ...]  # the HCA ports NCCL_IB_HCA (or all) selects that are ACTIVE
    usable: bool  # NCCL would use NET/IB
    reason: str  # why IB is (not) used


def ib_choice(rdma: RdmaFacts, settings: dict[str, Setting]) -> IbChoice:
    """NET/IB device list (src/transport/net_ib/init.cc): ACTIVE IB or RoCE ports, NCCL_IB_HCA."""
    text = _value(settings, "NCCL_IB_HCA")
    wanted = parse_nccl_list(text) if text else None
    ports = tuple(
        IbPort(h.name, p.number, p.transport, p.rate_gbps)
        for h in rdma.hcas
        for p in h.ports
        if p.active
        and p.link_layer in ("InfiniBand", "Ethernet")
        and (wanted is None or wanted.matches(h.name, p.number))
    )
    if _value(settings, "NCCL_IB_DISABLE") == "1":
        return IbChoice(ports, False, "NCCL_IB_DISABLE=1")
    net = (_value(settings, "NCCL_NET") or "").lower()
    if net and net != "ib":
        return IbChoice(ports, False, f"NCCL_NET={_value(settings, 'NCCL_NET')}")
    if not rdma.hcas:
        return IbChoice(ports, False, "no RDMA devices")
    if not ports:
        why = f"NCCL_IB_HCA={text} selects no ACTIVE port" if text else "no ACTIVE port"
        return IbChoice(ports, False, why)
    if rdma.verbs_loadable is not True:
        return IbChoice(ports, False, "libibverbs.so.1 cannot be loaded")
    if not rdma.uverbs:
        return IbChoice(ports, False, "/dev/infiniband is not visible")
    return IbChoice(ports, True, f"{len(ports)} ACTIVE port(s)")


# -- what the real library said ------------------------------------------------------------


@dataclass(frozen=True)
class IdAddress:
    family: int
    address: str
    port: int


def decode_unique_id(hexid: str) -> IdAddress | None:
    """The listen address inside an ncclUniqueId.

    Since NCCL 2.12 the id is struct ncclBootstrapHandle { uint64_t magic; union
    ncclSocketAddress addr; }; older releases put the sockaddr at offset 0. sa_family is
    host-endian (little on x86/arm64), the port is network order.
    """
    try:
        raw = bytes.fromhex(hexid)
    except ValueError:
        return None
    for offset in (8, 0):
        sa = raw[offset : offset + 28]
        if len(sa) < 28:
            continue
        family = int.from_bytes(sa[0:2], "little")
        port = int.from_bytes(sa[2:4], "big")
        if family == socket.AF_INET:
            return IdAddress(AF_INET, socket.inet_ntop(socket.AF_INET, sa[4:8]), port)
        if family == socket.AF_INET6:
            return IdAddress(AF_INET6, socket.inet_ntop(socket.AF_INET6, sa[8:24]), port)
    return None


# "Bootstrap : Using" up to 2.23, "Bootstrap: Using" from 2.24 (src/bootstrap.cc); very old
# releases listed several as "[0]eno1:…<0> [1]veth…<0>".
_BOOTSTRAP = re.compile(
    r"NCCL INFO Bootstrap ?: Using (?:\[\d+\])?(?P<iface>[^:\s]+):(?P<addr>\S+?)<(?P<port>\d+)>"
)
_NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.*)$", re.M)


@dataclass(frozen=True)
class LoggedBootstrap:
    interface: str | None
    address: str | None
    warning: str | None  # the first NCCL WARN line, when the library found nothing


def parse_bootstrap_log(text: str) -> LoggedBootstrap:
    m = _BOOTSTRAP.search(text)
    warn = _NCCL_WARN.search(text)
    if m:
        addr = m.group("addr").split("%", 1)[0]
        return LoggedBootstrap(m.group("iface"), addr, None)
    return LoggedBootstrap(None, None, warn.group("msg").strip() if warn else None)


@dataclass(frozen=True)
class LibraryBootstrap:
    """What the real libnccl chose: its log line, and the address inside its unique id."""

    logged: LoggedBootstrap
    id_address: IdAddress | None
    id_interface: str | None  # the local interface holding the id's address

    @property
    def interface(self) -> str | None:
        return self.logged.interface or self.id_interface

    @property
    def address(self) -> str | None:
        return self.logged.address or (self.id_address.address if self.id_address else None)
