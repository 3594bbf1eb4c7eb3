"""Interface facts from real namespaces: kinds, state, addresses, and the fallbacks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doctor.core.capture import Capture
from doctor.facts.network.net import AF_INET, AF_INET6, NetFacts, parse_net
from tests.cluster.netns import netns
from tests.nic.scenarios import no_dad, probe_in

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def raw() -> Any:
    """One namespace with every interface kind this kernel can make."""
    with netns("nicf") as ns:
        no_dad(ns)
        ns.add_bridge("br0", "198.18.7.1/24")
        ns.add_nic("port0")
        ns.ip("link", "set", "port0", "master", "br0")
        ns.add_nic("eth0", "198.18.1.1/24", "2001:2::1/64")
        ns.ip("link", "set", "eth0", "mtu", "1400")
        ns.add_nic("eth1", "198.18.2.1/24", up=False)
        ns.ip("tuntap", "add", "tap0", "mode", "tap")
        ns.ip("tuntap", "add", "tun0", "mode", "tun")
        ns.ip("link", "add", "vx0", "type", "vxlan", "id", "5", "dstport", "4789")
        ns.ip("link", "add", "link", "eth0", "name", "mv0", "type", "macvlan")
        ns.ip("route", "add", "default", "via", "198.18.1.254")
        yield probe_in(ns)


def parsed(raw: dict[str, Any]) -> NetFacts:
    net = parse_net(Capture(raw))
    assert isinstance(net, NetFacts), net
    return net


def test_kinds_state_and_attributes(raw: dict[str, Any]) -> None:
    net = parsed(raw)
    kinds = {n: i.kind for n, i in net.interfaces.items()}
    assert kinds == {
        "lo": "loopback",
        "br0": "bridge",
        "port0": "veth",
        "eth0": "veth",
        "eth1": "veth",
        "tap0": "tap",
        "tun0": "tun",
        "vx0": "vxlan",
        "mv0": "macvlan",
    }
    port = net.interfaces["port0"]
    assert (port.master, port.slave_kind) == ("br0", "bridge")
    eth0, eth1 = net.interfaces["eth0"], net.interfaces["eth1"]
    assert (eth0.state(), eth0.mtu) == ("up", 1400)
    assert eth1.state() == "down" and not eth1.running
    assert all(i.speed_mbps is None for i in net.interfaces.values())  # fake 10000s dropped
    assert net.default_routes == ("eth0",)
    assert {a.text() for a in eth0.addresses} >= {"198.18.1.1/24", "2001:2::1/64"}
    link_local = [a for a in eth0.addresses if a.link_local]
    assert link_local and link_local[0].scope_id == eth0.ifindex


def test_getifaddrs_order_is_ipv4_first(raw: dict[str, Any]) -> None:
    families = [a.family for a in parsed(raw).ifaddrs]
    assert families == sorted(families) and AF_INET in families and AF_INET6 in families


def test_without_getifaddrs_ip_rebuilds_the_same_list(raw: dict[str, Any]) -> None:
    real = parsed(raw)
    no_libc = copy.deepcopy(raw)
    del no_libc["values"]["getifaddrs"]
    rebuilt = parsed(no_libc)
    assert rebuilt.ifaddrs_source == "ip"
    key = {(a.name, a.address, a.prefixlen, a.scope_id) for a in real.ifaddrs}
    assert {(a.name, a.address, a.prefixlen, a.scope_id) for a in rebuilt.ifaddrs} == key
    assert [a.family for a in rebuilt.ifaddrs] == sorted(a.family for a in rebuilt.ifaddrs)
    running = {a.name for a in real.ifaddrs if a.flags & 0x40}
    assert {a.name for a in rebuilt.ifaddrs if a.flags & 0x40} == running


def test_without_ip_either_procfs_gives_ipv6(raw: dict[str, Any]) -> None:
    bare = copy.deepcopy(raw)
    del bare["values"]["getifaddrs"]
    bare["commands"].pop("ip-addr")
    bare["commands"].pop("ip-link")
    net = parsed(bare)
    assert net.ifaddrs_source == "if_inet6"
    assert "2001:2::1" in {a.address for a in net.ifaddrs if a.name == "eth0"}
    # Without netlink, kinds come from sysfs alone.
    kinds = {n: i.kind for n, i in net.interfaces.items()}
    assert (kinds["br0"], kinds["tap0"], kinds["lo"], kinds["eth0"]) == (
        "bridge",
        "tap",
        "loopback",
        "virtual",
    )


def test_unlistable_sysfs_is_missing_not_a_crash(raw: dict[str, Any]) -> None:
    broken = copy.deepcopy(raw)
    broken["dirs"]["/sys/class/net"] = {"error": {"kind": "unreadable", "detail": "EACCES"}}
    assert not parse_net(Capture(broken))
