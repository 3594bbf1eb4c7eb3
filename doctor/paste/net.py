"""Pasted `ip addr` (iproute2, busybox), `ip -br`, `ip -j addr`, `ifconfig` as the probe's ip-addr.

The probe runs ``ip -j addr show``; every one of these pastes says the same things in another layout
(names, flags, MTU, state, link type, master, addresses), so each is rewritten into that JSON and
doctor/facts/network/net.py reads it as it reads a probed node's. `ip -br addr` and `ip -br link`
each show half of it (addresses, or flags): they are kept per interface, so that both pasted
combine, and doctor/facts/network/ipaddr.py makes the same entries of them. What a paste cannot say
(sysfs: driver, PCI address, speed, NUMA node; routes; getifaddrs) stays absent. Lines a paste holds
that are none of these (elisions, comments, annotations) are skipped, and an address that was elided
or redacted (``10.0.x.x``) is left out rather than guessed.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from doctor.facts.network.ifkind import NETLINK_KINDS
from doctor.facts.network.ipaddr import BRIEF
from doctor.facts.network.netif import IFF_NAMES, IFF_RUNNING, IFF_UP
from doctor.paste.kind import Kind, command, matcher

# "2: eth0@if5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc ... master br0 state UP ..."
_IP_HEADER = re.compile(
    r"^\s*(?P<index>\d+):\s+(?P<name>[^\s:@]+)(?:@(?P<link>[^\s:]+))?:\s+"
    r"<(?P<flags>[A-Z0-9_,-]*)>(?P<rest>.*)$"
)
_LINK = re.compile(r"^\s+link/(?P<type>[\w-]+)(?:\s+(?P<mac>[0-9a-fA-F:.-]+))?")
_INET = re.compile(
    r"^\s+(?P<family>inet6?)\s+(?P<addr>[0-9a-fA-F.:]+)(?:/(?P<plen>\d{1,3}))?"
    r"(?:\s+peer\s+\S+)?(?P<rest>.*)$"
)
_SCOPE = re.compile(r"\bscope\s+(\w+)")
# Kinds `ip -d` names on the line after link/ (the rest ride on NETLINK_KINDS).
_DETAIL_KINDS = NETLINK_KINDS | {"tun", "team", "vrf", "openvswitch", "ipip", "gre", "sit"}

# ifconfig (net-tools 2.x): "eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500"
_IFC_HEADER = re.compile(
    r"^(?P<name>[^\s:]+)(?::[\w.-]+)?:\s+flags=(?P<num>\d+)<(?P<names>[^>]*)>(?:\s+mtu\s+(?P<mtu>\d+))?"
)
# ifconfig (net-tools 1.x, busybox): "eth0      Link encap:Ethernet  HWaddr 00:16:3E:..."
_IFC_OLD = re.compile(r"^(?P<name>[^\s:]+)(?::[\w.-]+)?\s+Link encap:\s*(?P<encap>\S+(?: \S+)?)")
_IFC_INET = re.compile(
    r"^\s+inet (?:addr:\s*)?(?P<addr>[0-9.]+)"
    r"(?:.*?(?:netmask |Mask:)(?P<mask>0x[0-9a-fA-F]{8}|[0-9.]+))?"
)
_IFC_INET6 = re.compile(
    r"^\s+inet6 (?:addr:\s*)?(?P<addr>[0-9a-fA-F:.]+)(?:/(?P<plen>\d+))?"
    r"(?:.*?prefixlen (?P<plen2>\d+))?(?:.*?(?:scopeid \S*<(?P<scope>\w+)>|Scope:(?P<scope2>\w+)))?"
)
_IFC_OLD_FLAGS = re.compile(r"^\s+(?P<words>(?:[A-Z-]+ )*[A-Z-]+)\s+MTU:(?P<mtu>\d+)")
_IFC_LINKS = {"loop": "loopback", "infiniband": "infiniband", "ether": "ether", "unspec": "none"}
_ENCAPS = {"local loopback": "loopback", "infiniband": "infiniband", "ethernet": "ether"}


def _address(family: str, text: str, prefixlen: int | None, scope: str | None) -> dict | None:
    """One addr_info entry, or None where the address was elided or is not an address."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if (ip.version == 6) != (family == "inet6"):
        return None
    if scope is None:
        scope = "host" if ip.is_loopback else "link" if ip.is_link_local else "global"
    full = 128 if ip.version == 6 else 32
    plen = prefixlen if prefixlen is not None and 0 <= prefixlen <= full else full
    return {"family": family, "local": str(ip), "prefixlen": plen, "scope": scope.lower()}


# `ip -d` (iproute2 5.x) names a device's bus: "parentbus pci parentdev 0000:3b:00.0".
_PARENT_BUS = re.compile(r"\bparentbus (\S+)")


def ip_addr_entries(text: str) -> list[dict[str, Any]]:
    """`ip addr` text (iproute2 or busybox, `-d` too) as the entries `ip -j addr` prints."""
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] | None = None
    for line in text.splitlines():
        header = _IP_HEADER.match(line)
        if header:
            rest = dict(re.findall(r"(\w+) (\S+)", header["rest"])[::-1])
            entry = {"ifindex": int(header["index"]), "ifname": header["name"]}
            entry.update(_peer(header["link"]))
            entry["flags"] = [f for f in header["flags"].split(",") if f]
            if rest.get("mtu", "").isdigit():
                entry["mtu"] = int(rest["mtu"])
            for key in ("master", "operstate"):
                value = rest.get("state" if key == "operstate" else key)
                if value:
                    entry[key] = value
            entry["addr_info"] = []
            entries.append(entry)
            continue
        if entry is None:
            continue
        if (bus := _PARENT_BUS.search(line)) is not None:  # on the link/ line or the next
            entry["parentbus"] = bus[1]
        if link := _LINK.match(line):
            entry.setdefault("link_type", link["type"])
            continue
        if inet := _INET.match(line):
            scope = _SCOPE.search(inet["rest"])
            plen = int(inet["plen"]) if inet["plen"] else None
            addr = _address(inet["family"], inet["addr"], plen, scope[1] if scope else None)
            if addr is not None:
                entry["addr_info"].append(addr)
            continue
        _detail(entry, line)
    return entries


def _peer(link: str | None) -> dict[str, Any]:
    """`eth0@if12` → link_index 12 (a link in another namespace, which iproute2 cannot name),
    `vlan5@bond0` → link bond0, as `ip -j` writes them; `sit0@NONE` has none."""
    if not link or link == "NONE":
        return {}
    if m := re.fullmatch(r"if(\d+)", link):
        return {"link_index": int(m[1])}
    return {"link": link}


def _detail(entry: dict[str, Any], line: str) -> None:
    """`ip -d`: the kind on the line after link/ ("veth", "bond mode 802.3ad ...", "bond_slave")."""
    words = line.split()
    if not words or not line[:1].isspace():
        return
    info = entry.setdefault("linkinfo", {})
    if words[0] in _DETAIL_KINDS and "info_kind" not in info:
        info["info_kind"] = words[0]
        if words[0] == "tun" and len(words) > 2 and words[1] == "type":
            info["info_data"] = {"type": words[2]}
    elif words[0].endswith("_slave") and words[0][:-6] in _DETAIL_KINDS:
        info["info_slave_kind"] = words[0][:-6]
    if not info:
        del entry["linkinfo"]


def _ifconfig_flags(bits: int) -> list[str]:
    """ifconfig's flag word in iproute2's names (NO-CARRIER where UP without RUNNING)."""
    names = [name for name, bit in IFF_NAMES.items() if bits & bit and name != "RUNNING"]
    if bits & IFF_UP and not bits & IFF_RUNNING:
        names.append("NO-CARRIER")
    return names


def ifconfig_entries(text: str) -> list[dict[str, Any]]:
    """`ifconfig -a` (net-tools 2.x `flags=`, 1.x and busybox `Link encap:`) as `ip -j addr`."""
    by_name: dict[str, dict[str, Any]] = {}
    entry: dict[str, Any] | None = None
    for line in text.splitlines():
        new, old = _IFC_HEADER.match(line), _IFC_OLD.match(line)
        if new or old:
            name = (new or old)["name"]  # type: ignore[index]
            # An alias (eth0:1) adds its addresses to its interface.
            entry = by_name.setdefault(name, {"ifname": name, "flags": [], "addr_info": []})
            if new:
                # The names, not the number: Linux prints it in decimal, BSD and macOS in hex.
                names = set(new["names"].split(","))
                entry["flags"] = _ifconfig_flags(sum(IFF_NAMES.get(n, 0) for n in names))
                if new["mtu"]:
                    entry["mtu"] = int(new["mtu"])
            elif old:
                encap = old["encap"].lower()
                entry["link_type"] = next(
                    (t for e, t in _ENCAPS.items() if encap.startswith(e)), "none"
                )
            continue
        if not line[:1].isspace():
            entry = entry if not line.strip() else None  # junk between interfaces ends one
        elif entry is not None:
            _ifconfig_line(entry, line)
    return list(by_name.values())


def _mask_bits(mask: str | None) -> int | None:
    """'255.255.255.0', or '0xffffff00' as BSD and macOS print it → 24."""
    if not mask:
        return None
    try:
        value = int(mask, 16) if mask.startswith("0x") else int(ipaddress.IPv4Address(mask))
    except ValueError:
        return None
    return bin(value).count("1")


def _ifconfig_line(entry: dict[str, Any], line: str) -> None:
    if inet := _IFC_INET.match(line):
        addr = _address("inet", inet["addr"], _mask_bits(inet["mask"]), None)
    elif inet6 := _IFC_INET6.match(line):
        plen_text = inet6["plen"] or inet6["plen2"]
        scope = inet6["scope"] or inet6["scope2"]
        scope = {"compat": "global", "site": "site"}.get((scope or "").lower(), scope)
        addr = _address("inet6", inet6["addr"], int(plen_text) if plen_text else None, scope)
    elif flags := _IFC_OLD_FLAGS.match(line):
        bits = sum(IFF_NAMES.get(w, 0) for w in set(flags["words"].split()))
        entry["flags"] = _ifconfig_flags(bits)
        entry["mtu"] = int(flags["mtu"])
        return
    else:
        words = line.split()
        if words and words[0] in _IFC_LINKS and "link_type" not in entry:
            entry["link_type"] = _IFC_LINKS[words[0]]
        return
    if addr is not None:
        entry["addr_info"].append(addr)


# `ip -br addr`: "eth0@if5        UP             10.0.0.2/24 fe80::1/64"; `ip -br link`:
# "eth0@if5        UP             02:42:ac:11:00:02 <BROADCAST,MULTICAST,UP,LOWER_UP>".
_BRIEF = re.compile(
    r"^(?P<name>[^\s@:]+)(?:@(?P<link>\S+))?\s+"
    r"(?P<state>UP|DOWN|UNKNOWN|LOWERLAYERDOWN|DORMANT|NOTPRESENT|TESTING)(?:\s+(?P<rest>.*?))?\s*$"
)
_BRIEF_ADDRS = re.compile(r"^(?:[0-9a-fA-F.:]+/\d{1,3}\s*)+$")
_BRIEF_LINK = re.compile(
    r"^(?P<mac>[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})+)?\s*<(?P<flags>[A-Z0-9_,-]*)>$"
)


def _brief_line(line: str) -> re.Match[str] | None:
    """A line of `ip -br addr` or `ip -br link`, with addresses or a link address and flags."""
    m = _BRIEF.match(line)
    rest = m["rest"] if m else None
    if m is None or (rest and not (_BRIEF_ADDRS.match(rest) or _BRIEF_LINK.match(rest))):
        return None
    # A line without addresses ("ifb0   DOWN") is only known by iproute2's columns: the name
    # padded to 16 characters and a space.
    return m if rest or m.start("state") >= 17 else None


def ip_brief_entries(text: str) -> dict[str, dict[str, Any]]:
    """`ip -br addr` / `ip -br link` by interface, each with what its form shows: addresses, or
    the flags and link type. Pasted one after the other they merge per interface (reader.py),
    and doctor/facts/network/ipaddr.py makes `ip -j addr` entries of them."""
    entries: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if not (m := _brief_line(line)):
            continue
        entry = entries.setdefault(m["name"], {})
        entry.update(_peer(m["link"]), operstate=m["state"])
        rest = m["rest"] or ""
        if link := _BRIEF_LINK.match(rest):
            entry["flags"] = [f for f in link["flags"].split(",") if f]
            octets = len(link["mac"].split(":")) if link["mac"] else 0
            if octets == 20:  # an IPoIB hardware address (QPN and GID)
                entry["link_type"] = "infiniband"
            continue
        addresses = entry.setdefault("addr_info", [])
        for word in rest.split():
            addr, _, plen = word.partition("/")
            family = "inet6" if ":" in addr else "inet"
            if (found := _address(family, addr, int(plen), None)) is not None:
                addresses.append(found)
    return entries


def ip_json_entries(text: str) -> list[dict[str, Any]]:
    """The JSON array of `ip -j addr` (or `ip -j -p`), junk before or after it ignored."""
    start = text.find("[")
    if start < 0:
        return []
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, dict) and isinstance(e.get("ifname"), str)]


def _fragment(entries: list[dict[str, Any]], what: str) -> dict[str, Any]:
    if not entries:
        return {}
    stdout = json.dumps(entries)
    note = f"converted from pasted {what}"
    return {"commands": {"ip-addr": command(["ip", "-j", "addr", "show"], stdout, note)}}


NET_KINDS = [
    Kind(
        "ip addr",
        lambda line: _IP_HEADER.match(line) is not None,
        lambda text: _fragment(ip_addr_entries(text), "`ip addr` text"),
    ),
    Kind(
        "ip -br",
        lambda line: bool((m := _brief_line(line)) and m["rest"]),
        lambda text: {"values": {BRIEF: {"value": e}}} if (e := ip_brief_entries(text)) else {},
    ),
    Kind(
        "ip -j addr",
        matcher(r"\s*\[\s*\{\s*\"(?:ifindex|ifname)\"", r"\s*\[\s*\{\s*$"),
        lambda text: _fragment(ip_json_entries(text), "`ip -j addr`"),
    ),
    Kind(
        "ifconfig",
        lambda line: _IFC_HEADER.match(line) is not None or _IFC_OLD.match(line) is not None,
        lambda text: _fragment(ifconfig_entries(text), "`ifconfig` text"),
    ),
]
DESCRIPTIONS = {
    "ip addr": "`ip addr` / `ip a` / `ip -d addr` (iproute2, busybox): interfaces, addresses",
    "ip -br": "`ip -br addr` / `ip -br link`: interfaces, state, addresses (or link flags)",
    "ip -j addr": "`ip -j addr` JSON: the same, as the probe reads it",
    "ifconfig": "`ifconfig -a` (net-tools `flags=` and old `Link encap:` forms, busybox)",
}
