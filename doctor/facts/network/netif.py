"""An interface and its addresses as NCCL and Gloo see them, and the flag words behind them."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IFF_UP = 0x1
IFF_LOOPBACK = 0x8
IFF_RUNNING = 0x40
# Interface flags by the names iproute2, busybox and ifconfig print (linux/if.h). iproute2 never
# prints RUNNING: it prints NO-CARRIER exactly when an interface is UP and not RUNNING.
IFF_NAMES = {
    "UP": IFF_UP,
    "BROADCAST": 0x2,
    "DEBUG": 0x4,
    "LOOPBACK": IFF_LOOPBACK,
    "POINTOPOINT": 0x10,
    "NOTRAILERS": 0x20,
    "RUNNING": IFF_RUNNING,
    "NOARP": 0x80,
    "PROMISC": 0x100,
    "ALLMULTI": 0x200,
    "MASTER": 0x400,
    "SLAVE": 0x800,
    "MULTICAST": 0x1000,
    "PORTSEL": 0x2000,
    "AUTOMEDIA": 0x4000,
    "DYNAMIC": 0x8000,
    "LOWER_UP": 0x10000,
    "DORMANT": 0x20000,
    "ECHO": 0x40000,
}
AF_INET = 2
AF_INET6 = 10
ARPHRD_INFINIBAND = 32
ARPHRD_LOOPBACK = 772


@dataclass(frozen=True)
class IfAddr:
    """One address of an interface, the way getifaddrs() hands it to NCCL and Gloo."""

    name: str
    family: int  # AF_INET (2) or AF_INET6 (10)
    address: str
    prefixlen: int
    flags: int  # the interface's flags (IFF_UP, IFF_RUNNING, ...) when listed
    scope_id: int = 0  # IPv6 link-local: the interface index

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.address)

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_interface(f"{self.address}/{self.prefixlen}").network

    @property
    def link_local(self) -> bool:
        return self.ip.is_link_local

    @property
    def loopback(self) -> bool:
        return self.ip.is_loopback

    @property
    def scope(self) -> str:
        if self.loopback:
            return "host"
        return "link" if self.link_local else "global"

    def text(self) -> str:
        return f"{self.address}/{self.prefixlen}"


@dataclass(frozen=True)
class Interface:
    name: str
    ifindex: int | None
    kind: str  # physical, veth, bridge, bond, vlan, macvlan, ipvlan, vxlan, tun, tap, wireguard,
    # ipoib, loopback, dummy, virtual; "unknown" where pasted text says nothing (ifkind.py)
    flags: int
    mtu: int | None
    carrier: bool | None  # None: unreadable (the kernel refuses while the link is down)
    speed_mbps: int | None  # None: unknown (virtual links report a fake 10000, others -1)
    operstate: str | None
    master: str | None  # the bridge or bond this interface is enslaved to
    slave_kind: str | None  # "bridge" or "bond" when enslaved
    driver: str | None
    pci_address: str | None
    numa_node: int | None
    addresses: tuple[IfAddr, ...]
    # Where the kind comes from: "sysfs" (probed), "text" (a paste that shows it: `ip -d`, the
    # link type, bond/bridge roles), "name" (a paste: guessed from the name or an @ifN peer).
    kind_from: str = "sysfs"

    @property
    def up(self) -> bool:
        return bool(self.flags & IFF_UP)

    @property
    def running(self) -> bool:
        return bool(self.flags & IFF_RUNNING)

    @property
    def link_local_only(self) -> bool:
        return bool(self.addresses) and all(a.link_local for a in self.addresses)

    def state(self) -> str:
        if not self.up:
            return "down"
        return "up" if self.running else "no-carrier"


def flag_bits(names: list[str]) -> int:
    """The flag word from iproute2's flag names; RUNNING is UP without NO-CARRIER."""
    bits = 0
    for name in set(names):
        bits |= IFF_NAMES.get(name, 0)
    if bits & IFF_UP and "NO-CARRIER" not in names:
        bits |= IFF_RUNNING
    return bits
