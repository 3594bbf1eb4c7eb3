"""Interfaces as `ip -j addr` lists them, for a node seen only through that (a paste): no sysfs."""

from __future__ import annotations

import json

from doctor.capture import Capture
from doctor.facts.netif import NETLINK_KINDS, IfAddr, Interface, flag_bits
from doctor.model import Missing


def ip_entries(cap: Capture) -> list[dict]:
    """`ip -j addr` (or a paste converted to it): one entry per interface that has a name."""
    result = cap.command("ip-addr")
    if isinstance(result, Missing) or result.rc != 0:
        return []
    try:
        entries = json.loads(result.stdout)
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("ifname"), str)]


def ip_kind(entry: dict, info: dict, entries: list[dict]) -> str:
    """The kind `ip addr` shows: netlink's own (with -d), the link type, bond/bridge roles."""
    kind = info.get("info_kind")
    if kind == "tun":
        return "tap" if (info.get("info_data") or {}).get("type") == "tap" else "tun"
    if kind in NETLINK_KINDS:
        return str(kind)
    if entry.get("link_type") == "loopback" or "LOOPBACK" in entry.get("flags", []):
        return "loopback"
    if entry.get("link_type") == "infiniband":
        return "ipoib"
    if "MASTER" in entry.get("flags", []):  # IFF_MASTER: a bonding master
        return "bond"
    ports = [e for e in entries if e.get("master") == entry["ifname"]]
    if ports and not any("SLAVE" in e.get("flags", []) for e in ports):
        return "bridge"  # enslaved ports without IFF_SLAVE: bridge ports
    return "unknown"  # a physical NIC, a dummy, a veth...: plain `ip addr` does not say


def ip_interfaces(
    entries: list[dict], links: dict[str, dict], ifaddrs: tuple[IfAddr, ...]
) -> list[Interface]:
    kinds = {
        e["ifname"]: ip_kind(
            e, e.get("linkinfo") or links.get(e["ifname"], {}).get("linkinfo") or {}, entries
        )
        for e in entries
    }
    out = []
    for e in entries:
        name, names = e["ifname"], list(e.get("flags", []))
        info = e.get("linkinfo") or links.get(name, {}).get("linkinfo") or {}
        master = e.get("master") if isinstance(e.get("master"), str) else None
        slave = info.get("info_slave_kind")
        if slave is None and master is not None:
            slave = (
                "bond" if "SLAVE" in names else "bridge" if kinds.get(master) == "bridge" else None
            )
        carrier = True if "LOWER_UP" in names else False if "NO-CARRIER" in names else None
        out.append(
            Interface(
                name=name,
                ifindex=e["ifindex"] if isinstance(e.get("ifindex"), int) else None,
                kind=kinds[name],
                flags=flag_bits(names),
                mtu=e["mtu"] if isinstance(e.get("mtu"), int) else None,
                carrier=carrier,
                speed_mbps=None,
                operstate=str(e["operstate"]).lower() if e.get("operstate") else None,
                master=master,
                slave_kind=str(slave) if slave else None,
                driver=None,
                pci_address=None,
                numa_node=None,
                addresses=tuple(a for a in ifaddrs if a.name == name),
            )
        )
    return out
