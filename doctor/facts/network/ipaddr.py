"""Interfaces as `ip -j addr` lists them, for a node seen only through that (a paste): no sysfs."""

from __future__ import annotations

import json
import re

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.network.ifkind import Evidence, IfKind, classify
from doctor.facts.network.netif import IfAddr, Interface, flag_bits

# A pasted `ip -br addr` and/or `ip -br link` (doctor/paste/net.py): {ifname: what they show},
# merged per interface when both were pasted.
BRIEF = "paste:ip-brief"
# The flags `ip -br addr` leaves out, from its state column (RFC 2863 operstate): UNKNOWN is a
# loopback's, a tun's or a bridge's, which pass traffic; DOWN is down or without carrier.
_STATE_FLAGS = {
    "UP": ["UP", "LOWER_UP"],
    "UNKNOWN": ["UP", "LOWER_UP"],
    "LOWERLAYERDOWN": ["UP", "NO-CARRIER"],
    "DORMANT": ["UP", "NO-CARRIER"],
}


def _brief_entries(cap: Capture) -> list[dict]:
    brief = cap.value(BRIEF)
    out: list[dict] = []
    for name, shown in brief.items() if isinstance(brief, dict) else []:
        if not isinstance(shown, dict):
            continue
        entry = {**shown, "ifname": str(name)}
        addresses = [a for a in entry.get("addr_info") or [] if isinstance(a, dict)]
        entry["addr_info"] = addresses
        if not isinstance(entry.get("flags"), list):  # no `ip -br link` line for it
            entry["flags"] = list(_STATE_FLAGS.get(str(entry.get("operstate")), []))
            if any(a.get("scope") == "host" for a in addresses):
                entry["flags"].append("LOOPBACK")
        out.append(entry)
    return out


def ip_entries(cap: Capture) -> list[dict]:
    """`ip -j addr` (or a paste converted to it, or pasted `ip -br` listings): one entry per
    interface that has a name."""
    result = cap.command("ip-addr")
    if isinstance(result, Missing) or result.rc != 0:
        return _brief_entries(cap)
    try:
        entries = json.loads(result.stdout)
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("ifname"), str)]


def ip_kind(entry: dict, info: dict, entries: list[dict]) -> IfKind:
    """The kind `ip addr` shows (netlink's own with -d, the link type, bond and bridge roles),
    else the one its name and peer suggest: a paste has no sysfs to ask."""
    flags = entry.get("flags", [])
    ports = [e for e in entries if e.get("master") == entry["ifname"]]
    seen = Evidence(
        info=info,
        loopback=entry.get("link_type") == "loopback" or "LOOPBACK" in flags,
        infiniband=entry.get("link_type") == "infiniband",
        bond="MASTER" in flags,  # IFF_MASTER: a bonding master
        # Enslaved ports without IFF_SLAVE are a bridge's.
        bridge=bool(ports) and not any("SLAVE" in e.get("flags", []) for e in ports),
        # `eth0@if12`: iproute2 names a link it cannot resolve here by index (`ip -j`: link_index
        # without link), which a link in another namespace is.
        peer_elsewhere="link_index" in entry and "link" not in entry,
        pair=any(
            e["ifname"] == entry.get("link") and e.get("link") == entry["ifname"] for e in entries
        ),
        # `ip -d` names a device's bus (iproute2 5.x "parentbus pci parentdev 0000:3b:00.0"):
        # a NIC or a VF on a bus, as sysfs's device link says for a probed node.
        device=True if entry.get("parentbus") else None,
        in_pod=any(re.fullmatch(r"net\d+", str(e.get("ifname"))) for e in entries),
    )
    return classify(entry["ifname"], seen)


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
                "bond"
                if "SLAVE" in names
                else "bridge"
                if master in kinds and kinds[master].name == "bridge"
                else None
            )
        carrier = True if "LOWER_UP" in names else False if "NO-CARRIER" in names else None
        out.append(
            Interface(
                name=name,
                ifindex=e["ifindex"] if isinstance(e.get("ifindex"), int) else None,
                kind=kinds[name].name,
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
                kind_from="name" if kinds[name].guessed else "text",
            )
        )
    return out
