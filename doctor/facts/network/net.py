"""Network interfaces: kind, state, addresses and the exact getifaddrs() order NCCL walks."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.network.ifkind import Evidence, classify
from doctor.facts.network.ipaddr import ip_entries, ip_interfaces
from doctor.facts.network.netif import (
    AF_INET,
    AF_INET6,
    ARPHRD_INFINIBAND,
    ARPHRD_LOOPBACK,
    IFF_RUNNING,
    IFF_UP,
    IfAddr,
    Interface,
    flag_bits,
)

ROOT = "/sys/class/net"


@dataclass(frozen=True)
class Resolved:
    family: int
    address: str
    bindable: bool


@dataclass(frozen=True)
class NetFacts:
    interfaces: dict[str, Interface]  # in ifindex order
    ifaddrs: tuple[IfAddr, ...]  # getifaddrs() order (AF_INET before AF_INET6 on glibc)
    # "getifaddrs"; "ip" where rebuilt from `ip -j addr`; "if_inet6" (IPv6 only) as a last resort
    ifaddrs_source: str
    default_routes: tuple[str, ...]  # interfaces holding a default route (IPv4, then IPv6)
    hostname: str | Missing
    hostname_addrs: tuple[Resolved, ...] | Missing
    files: dict[str, str]  # Open MPI mca-params.conf files that exist, path -> text

    def owner(self, address: str) -> str | None:
        """The interface holding this address, if any."""
        for a in self.ifaddrs:
            if a.address == address:
                return a.name
        return None


def _int(text: str | Missing, base: int = 10) -> int | None:
    if isinstance(text, Missing):
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


def _prefixlen(mask: str | None) -> int:
    if not mask:
        return 0
    return bin(int(ipaddress.ip_address(mask))).count("1")


def _linkinfo(cap: Capture) -> dict[str, dict]:
    """`ip -j -d link` keyed by name; empty where ip is missing or says nothing useful."""
    result = cap.command("ip-link")
    if isinstance(result, Missing) or result.rc != 0:
        return {}
    try:
        return {str(e["ifname"]): e for e in json.loads(result.stdout) if "ifname" in e}
    except (ValueError, TypeError, KeyError):
        return {}


def _kind(cap: Capture, name: str, link: dict, arphrd: int | None) -> str:
    base = f"{ROOT}/{name}"
    seen = Evidence(
        info=link.get("linkinfo") or {},
        loopback=arphrd == ARPHRD_LOOPBACK,
        infiniband=arphrd == ARPHRD_INFINIBAND,
        bridge=cap.value(f"exists:{base}/bridge") is True,
        bond=cap.value(f"exists:{base}/bonding") is True,
        tun_flags=_int(cap.file(f"{base}/tun_flags"), 16),
        device=isinstance(cap.link(f"{base}/device"), str),
    )
    return classify(name, seen).name


def _ifaddrs(cap: Capture) -> tuple[tuple[IfAddr, ...], str]:
    raw = cap.value("getifaddrs")
    if isinstance(raw, list):
        return (
            tuple(
                IfAddr(
                    str(e["name"]),
                    int(e["family"]),
                    str(e["address"]),
                    _prefixlen(e.get("netmask")),
                    int(e["flags"]),
                    int(e.get("scope_id") or 0),
                )
                for e in raw
                if int(e["family"]) in (AF_INET, AF_INET6)
            ),
            "getifaddrs",
        )
    # Rebuilt from `ip -j addr`: glibc lists every IPv4 address, then every IPv6 one.
    result = cap.command("ip-addr")
    entries = ip_entries(cap)
    if (isinstance(result, Missing) or result.rc != 0) and not entries:
        return _if_inet6(cap), "if_inet6"
    out: list[IfAddr] = []
    for family, label in ((AF_INET, "inet"), (AF_INET6, "inet6")):
        for e in entries:
            flags = flag_bits(e.get("flags", []))
            for a in e.get("addr_info", []):
                if a.get("family") == label and "local" in a:
                    scope = int(e.get("ifindex") or 0) if a.get("scope") == "link" else 0
                    out.append(
                        IfAddr(e["ifname"], family, a["local"], int(a["prefixlen"]), flags, scope)
                    )
    return tuple(out), "ip"


def _if_inet6(cap: Capture) -> tuple[IfAddr, ...]:
    """Last resort, IPv6 only: /proc/net/if_inet6 (address, ifindex, prefix, scope, flags, name)."""
    text = cap.file("/proc/net/if_inet6")
    if not isinstance(text, str):
        return ()
    out = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != 6 or len(cols[0]) != 32:
            continue
        address = str(ipaddress.IPv6Address(bytes.fromhex(cols[0])))
        scope = int(cols[1], 16) if int(cols[3], 16) == 0x20 else 0
        flags = _sysfs_flags(cap, f"{ROOT}/{cols[5]}")
        out.append(IfAddr(cols[5], AF_INET6, address, int(cols[2], 16), flags, scope))
    return tuple(out)


def _default_routes(cap: Capture) -> tuple[str, ...]:
    out: list[str] = []
    v4 = cap.file("/proc/net/route")
    if isinstance(v4, str):
        for line in v4.splitlines()[1:]:
            cols = line.split()
            if len(cols) > 7 and cols[1] == "00000000" and cols[7] == "00000000":
                out.append(cols[0])
    v6 = cap.file("/proc/net/ipv6_route")
    if isinstance(v6, str):
        for line in v6.splitlines():
            cols = line.split()
            if len(cols) == 10 and cols[0] == "0" * 32 and cols[1] == "00" and cols[9] != "lo":
                out.append(cols[9])
    return tuple(dict.fromkeys(out))


def _resolved(cap: Capture) -> tuple[str | Missing, tuple[Resolved, ...] | Missing]:
    raw = cap.value("resolve:hostname")
    if isinstance(raw, Missing):
        # getaddrinfo failed (no /etc/hosts entry, no DNS): the name itself was still read.
        hostname = cap.value("hostname")
        return hostname if isinstance(hostname, str) else raw, raw
    addrs = tuple(
        Resolved(int(a["family"]), str(a["address"]), bool(a["bindable"]))
        for a in raw.get("addresses", [])
    )
    return str(raw.get("hostname", "?")), addrs


def parse_net(cap: Capture) -> NetFacts | Missing:
    names = cap.dir(ROOT)
    links = _linkinfo(cap)
    ifaddrs, source = _ifaddrs(cap)
    interfaces: list[Interface] = []
    if isinstance(names, Missing):
        # Sysfs never read (a pasted `ip addr` or `ifconfig`): what `ip -j addr` says, no more.
        entries = ip_entries(cap) if names.kind == "unsupported" else []
        if not entries:
            return names
        interfaces = ip_interfaces(entries, links, ifaddrs)
        names = []
    for name in names:
        base = f"{ROOT}/{name}"
        link = links.get(name, {})
        kind = _kind(cap, name, link, _int(cap.file(f"{base}/type")))
        master = cap.link(f"{base}/master")
        slave = (link.get("linkinfo") or {}).get("info_slave_kind")
        if slave is None and cap.value(f"exists:{base}/brport") is True:
            slave = "bridge"
        if slave is None and cap.value(f"exists:{base}/bonding_slave") is True:
            slave = "bond"
        speed = _int(cap.file(f"{base}/speed"))
        driver = cap.link(f"{base}/device/driver")
        device = cap.link(f"{base}/device")
        numa = _int(cap.file(f"{base}/device/numa_node"))
        carrier = _int(cap.file(f"{base}/carrier"))
        interfaces.append(
            Interface(
                name=name,
                ifindex=_int(cap.file(f"{base}/ifindex")),
                kind=kind,
                flags=_flags(cap, base, ifaddrs, name),
                mtu=_int(cap.file(f"{base}/mtu")),
                carrier=None if carrier is None else carrier == 1,
                # Only physical NICs and IPoIB report a real speed; veth/bridge/tun say 10000.
                speed_mbps=speed
                if speed is not None and speed > 0 and kind in ("physical", "ipoib", "bond")
                else None,
                operstate=_text(cap.file(f"{base}/operstate")),
                master=master.rsplit("/", 1)[-1] if isinstance(master, str) else None,
                slave_kind=str(slave) if slave else None,
                driver=driver.rsplit("/", 1)[-1] if isinstance(driver, str) else None,
                pci_address=_pci(device),
                numa_node=numa if numa is not None and numa >= 0 else None,
                addresses=tuple(a for a in ifaddrs if a.name == name),
            )
        )
    interfaces.sort(key=lambda i: (i.ifindex is None, i.ifindex or 0, i.name))
    hostname, resolved = _resolved(cap)
    files = {}
    for path in cap.paths("files", "/"):
        text = cap.file(path)
        if path.endswith("mca-params.conf") and isinstance(text, str):
            files[path] = text
    return NetFacts(
        interfaces={i.name: i for i in interfaces},
        ifaddrs=ifaddrs,
        ifaddrs_source=source,
        default_routes=_default_routes(cap),
        hostname=hostname,
        hostname_addrs=resolved,
        files=files,
    )


def _flags(cap: Capture, base: str, ifaddrs: tuple[IfAddr, ...], name: str) -> int:
    for a in ifaddrs:
        if a.name == name:
            return a.flags
    return _sysfs_flags(cap, base)


def _sysfs_flags(cap: Capture, base: str) -> int:
    """Interface flags with IFF_RUNNING, which sysfs leaves out (the kernel derives it)."""
    flags = _int(cap.file(f"{base}/flags"), 16) or 0
    if flags & IFF_UP and _text(cap.file(f"{base}/operstate")) in ("up", "unknown"):
        flags |= IFF_RUNNING
    return flags


def _text(value: str | Missing) -> str | None:
    return value.strip() if isinstance(value, str) else None


def _pci(device: str | Missing) -> str | None:
    """'../../../0000:3b:00.0' → '0000:3b:00.0'; virtio and other non-PCI parents give None."""
    if not isinstance(device, str):
        return None
    last = device.rsplit("/", 1)[-1]
    return last if last.count(":") == 2 and "." in last else None
