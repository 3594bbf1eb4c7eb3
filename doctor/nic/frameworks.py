"""What Gloo, TensorPipe and Open MPI will bind to, from the same interface facts."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from doctor.core.model import Missing
from doctor.facts.network.net import AF_INET, NetFacts
from doctor.nic.config import Setting
from doctor.nic.grammar import MpiList, parse_gloo_list, parse_mpi_list


@dataclass(frozen=True)
class Binding:
    """One address a library binds and advertises: the interface holding it (None: not local)."""

    interface: str | None
    address: str | None
    error: str | None = None

    @property
    def loopback(self) -> bool:
        return self.address is not None and ipaddress.ip_address(self.address).is_loopback


@dataclass(frozen=True)
class SocketChoice:
    rule: str  # "GLOO_SOCKET_IFNAME=eth0" or "hostname vm resolves to 127.0.1.1"
    bindings: tuple[Binding, ...]
    problems: tuple[str, ...] = ()


def lookup_iface(net: NetFacts, name: str) -> Binding:
    """gloo lookupAddrForIface(): the first IPv4/IPv6 getifaddrs entry with that exact name.

    No up/running test: Gloo binds an address of a down interface and fails later.
    """
    for a in net.ifaddrs:
        if a.name == name:
            return Binding(name, a.address)
    why = "no such interface" if name not in net.interfaces else "no IP address on it"
    return Binding(name, None, f"Unable to find address for: {name} ({why})")


def by_hostname(net: NetFacts, what: str) -> SocketChoice:
    """No interface named: resolve the hostname and bind the first address that binds."""
    resolved = net.hostname_addrs
    if isinstance(resolved, Missing) and resolved.kind == "unsupported":
        # Never looked up (pasted `ip addr` text): what the hostname resolves to is unknown.
        return SocketChoice(f"{what} unset; the hostname's addresses are unknown", ())
    if isinstance(resolved, Missing) or not resolved:
        return SocketChoice(
            f"{what} unset; hostname {net.hostname} does not resolve",
            (Binding("lo", "127.0.0.1", "falls back to the loopback address"),),
        )
    for r in resolved:
        if r.bindable:
            rule = f"{what} unset; hostname {net.hostname} resolves to {r.address}"
            # gloo's sockaddrToInterfaceName() puts any 127.x address on the loopback device.
            owner = net.owner(r.address) or ("lo" if r.address.startswith("127.") else None)
            return SocketChoice(rule, (Binding(owner, r.address),))
    rule = f"{what} unset; hostname {net.hostname} resolves to no local address"
    return SocketChoice(rule, (Binding("lo", "127.0.0.1", "falls back to the loopback address"),))


def gloo_choice(net: NetFacts, env: dict[str, str]) -> SocketChoice:
    """ProcessGroupGloo: GLOO_SOCKET_IFNAME (over one character) names one device per token."""
    text = env.get("GLOO_SOCKET_IFNAME")
    if text is None or len(text) <= 1:
        return by_hostname(net, "GLOO_SOCKET_IFNAME")
    names = parse_gloo_list(text)
    return SocketChoice(
        f"GLOO_SOCKET_IFNAME={text}",
        tuple(lookup_iface(net, n) for n in names.names),
        names.problems,
    )


def tp_choice(net: NetFacts, env: dict[str, str]) -> SocketChoice:
    """TensorPipe (torch RPC): TP_SOCKET_IFNAME is one name, no list; else the hostname."""
    text = env.get("TP_SOCKET_IFNAME")
    if not text:
        return by_hostname(net, "TP_SOCKET_IFNAME")
    problems = ("TensorPipe takes one interface name, not a list",) if "," in text else ()
    return SocketChoice(f"TP_SOCKET_IFNAME={text}", (lookup_iface(net, text),), problems)


@dataclass(frozen=True)
class MpiChoice:
    parameter: str  # btl_tcp or oob_tcp
    rule: str
    interfaces: tuple[str, ...]
    problems: tuple[str, ...] = ()


def _ipv4_networks(net: NetFacts, name: str) -> list:
    return [a.network for a in net.ifaddrs if a.name == name and a.family == AF_INET]


def mpi_choice(net: NetFacts, mca: dict[str, Setting], component: str) -> MpiChoice:
    """Open MPI TCP (btl_tcp or oob_tcp): _if_include or _if_exclude, else all but loopback."""
    inc = mca.get(f"{component}_if_include")
    exc = mca.get(f"{component}_if_exclude")
    problems: list[str] = []
    candidates = [
        i.name
        for i in net.interfaces.values()
        if i.up and _ipv4_networks(net, i.name) and i.kind != "loopback"
    ]
    if inc and exc:
        problems.append("Both TCP interface include and exclude lists were specified")
    if inc:
        lst: MpiList = parse_mpi_list(inc.value)
        chosen = [n for n in candidates if lst.matches(n, _ipv4_networks(net, n))]
        rule = f"{component}_if_include={inc.value} ({inc.source})"
    elif exc:
        lst = parse_mpi_list(exc.value)
        chosen = [n for n in candidates if not lst.matches(n, _ipv4_networks(net, n))]
        rule = f"{component}_if_exclude={exc.value} ({exc.source})"
    else:
        return MpiChoice(component, "default: every IPv4 interface but loopback", tuple(candidates))
    problems += lst.problems
    return MpiChoice(component, rule, tuple(chosen), tuple(problems))
