"""Pasted `ip a`, `ip -d a`, `ip -j addr`, `ifconfig`, busybox: the probe's interface facts."""

from __future__ import annotations

import json

import pytest

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.network.net import NetFacts, parse_net
from tests.paste.pastekit import PASTES, pasted, read_text

EVERY_FORM = [
    "netns-ip-a.txt",
    "netns-ip-d-addr.txt",
    "netns-ip-j-addr.json",
    "netns-ip-j-p-addr.json",
    "netns-ifconfig-a.txt",
    "netns-busybox-ip-a.txt",
    "netns-busybox-ifconfig-a.txt",
]


def probed() -> NetFacts:
    net = parse_net(Capture(json.loads((PASTES / "netns-probe.json").read_text())))
    assert isinstance(net, NetFacts)
    return net


def net_of(text: str) -> NetFacts:
    net = parse_net(read_text(text))
    assert isinstance(net, NetFacts), net
    return net


@pytest.mark.parametrize("name", EVERY_FORM)
def test_every_form_agrees_with_the_probe_on_state_and_addresses(name: str) -> None:
    probe, paste = probed(), net_of(pasted(name))
    assert set(paste.interfaces) == set(probe.interfaces)
    for iface in probe.interfaces.values():
        mine = paste.interfaces[iface.name]
        assert mine.state() == iface.state(), iface.name
        assert mine.up == iface.up and mine.running == iface.running, iface.name
        assert sorted(a.text() for a in mine.addresses) == sorted(
            a.text() for a in iface.addresses
        ), iface.name
        assert mine.link_local_only == iface.link_local_only, iface.name
        # What the text shows is the probe's kind; a guess from a name may miss (ifconfig and
        # busybox do not show a container's eth0@if2 peer) and says it is one.
        assert mine.kind == iface.kind or mine.kind_from == "name" or mine.kind == "unknown"
        if name in ("netns-ip-a.txt", "netns-ip-j-addr.json"):  # the @if2 peer shows
            assert mine.kind in (iface.kind, "unknown"), iface.name
    # NCCL walks getifaddrs() order: IPv4 first, then IPv6, as the probe saw it.
    assert [a.text() for a in paste.ifaddrs if a.family == 2] == [
        a.text() for a in probe.ifaddrs if a.family == 2
    ] or name.startswith(("netns-ifconfig", "netns-busybox-ifconfig"))  # ifconfig sorts by name


BRIEF_FORMS = ["netns-ip-br-a.txt", "netns-ip-br-c-a.txt", "netns-ip-br-link.txt"]


@pytest.mark.parametrize("name", BRIEF_FORMS)
def test_ip_brief_agrees_with_the_probe_of_its_namespace(name: str) -> None:
    net = parse_net(Capture(json.loads((PASTES / "netns-br-probe.json").read_text())))
    assert isinstance(net, NetFacts)
    paste = net_of(pasted(name))
    assert set(paste.interfaces) == set(net.interfaces)  # no ifindex shown: sorted by name
    for iface in net.interfaces.values():
        mine = paste.interfaces[iface.name]
        assert (mine.state(), mine.up, mine.running) == (
            iface.state(),
            iface.up,
            iface.running,
        ), iface.name
        if "link" not in name:  # `ip -br link` shows no addresses
            assert [a.text() for a in mine.addresses] == [a.text() for a in iface.addresses]
        # eth0@if2 and off0@if3 (peers in another namespace), vA@vB/vB@vA (a pair) are veths;
        # br0 a bridge by its name; mv0@eth0 (a macvlan) is not guessed.
        assert mine.kind in (iface.kind, "unknown"), iface.name
    kinds = {n: i.kind for n, i in paste.interfaces.items()}
    assert (kinds["eth0"], kinds["vA"], kinds["br0"], kinds["mv0"]) == (
        "veth",
        "veth",
        "bridge",
        "unknown",
    )


def test_ip_brief_addr_and_link_pasted_one_after_the_other_combine() -> None:
    addr = "$ ip -br a\n" + pasted("netns-ip-br-a.txt")
    link = "$ ip -br link\n" + pasted("netns-ip-br-link.txt")
    for text in (addr + link, link + addr):
        i = net_of(text).interfaces
        # Addresses from `ip -br a`, the exact flags from `ip -br link`, in either order.
        assert [a.text() for a in i["eth0"].addresses][:2] == ["198.18.7.5/24", "fd00:7::5/64"]
        assert i["ll0"].state() == "no-carrier" and i["off0"].state() == "down"
        assert i["lo"].kind == "loopback"


def test_ip_brief_ipoib_and_junk() -> None:
    text = (
        "# written from iproute2's `ip -br link` layout, not captured: an IPoIB port\n"
        "ib0              UP             00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:"
        "00:10 <BROADCAST,MULTICAST,UP,LOWER_UP>\n"
        "Status UP\n"
    )
    i = net_of(text).interfaces
    assert list(i) == ["ib0"] and (i["ib0"].kind, i["ib0"].kind_from) == ("ipoib", "text")


def test_ip_details_give_every_kind_the_probe_gives() -> None:
    probe, paste = probed(), net_of(pasted("netns-ip-d-addr.txt"))
    for iface in probe.interfaces.values():
        mine = paste.interfaces[iface.name]
        assert (mine.kind, mine.master, mine.slave_kind, mine.ifindex, mine.mtu) == (
            iface.kind,
            iface.master,
            iface.slave_kind,
            iface.ifindex,
            iface.mtu,
        ), iface.name
    assert [i.name for i in paste.interfaces.values()] == list(probe.interfaces)


def test_plain_ip_a_says_only_what_it_shows() -> None:
    net = net_of(pasted("netns-ip-a.txt"))
    kinds = {n: i.kind for n, i in net.interfaces.items()}
    # Loopback by its link type, the bridge by its port's "master br0": shown by the text.
    assert kinds["lo"] == "loopback" and kinds["br0"] == "bridge"
    assert net.interfaces["br0"].kind_from == "text"
    assert (net.interfaces["vA"].master, net.interfaces["vA"].slave_kind) == ("br0", "bridge")
    # nc0@nc1 and nc1@nc0, each the other's link: a veth pair, as the text shows.
    assert (kinds["nc0"], net.interfaces["nc0"].kind_from) == ("veth", "text")
    # eth0@if2 has its peer in another namespace: a container's veth, guessed, and said so;
    # tap0 by its name. A macvlan and a vxlan (mv0@eth0, vx0) look alike without -d and are
    # not guessed.
    assert (kinds["eth0"], kinds["tap0"]) == ("veth", "tap")
    assert {net.interfaces[n].kind_from for n in ("eth0", "tap0")} == {"name"}
    assert {kinds[n] for n in ("mv0", "vx0")} == {"unknown"}
    assert net.interfaces["nc0"].operstate == "lowerlayerdown"
    assert net.interfaces["ll0"].addresses[0].text() == "169.254.3.4/16"
    assert net.interfaces["ll1"].link_local_only
    # What a paste cannot show stays unknown, never invented.
    eth0 = net.interfaces["eth0"]
    assert (eth0.driver, eth0.pci_address, eth0.speed_mbps, eth0.numa_node) == (None,) * 4
    assert isinstance(net.hostname, Missing) and net.default_routes == ()


BOND_VLAN = pasted("written-ip-d-bond-vlan.txt")


def test_bond_slaves_vlan_sriov_and_ipoib_with_details() -> None:
    net = net_of(BOND_VLAN)
    i = net.interfaces
    assert (i["bond0"].kind, i["bond0.300"].kind, i["ib0"].kind) == ("bond", "vlan", "ipoib")
    assert (i["ens1f0"].master, i["ens1f0"].slave_kind) == ("bond0", "bond")
    assert i["ens1f1"].state() == "no-carrier" and i["ens1f1"].carrier is False
    # A physical NIC by its predictable name; `ip` does not say so: a guess, marked as one.
    assert (i["ens1f0"].kind, i["ens1f0"].kind_from) == ("physical", "name")
    assert (i["bond0"].kind_from, i["bond0.300"].kind_from) == ("text", "text")
    assert [a.text() for a in i["bond0.300"].addresses] == ["10.30.0.7/24"]


def test_bond_and_its_slaves_without_details() -> None:
    plain = "\n".join(
        line for line in BOND_VLAN.splitlines() if not line.startswith(("    bond", "    vlan"))
    )
    i = net_of(plain).interfaces
    assert (i["bond0"].kind, i["ens1f1"].slave_kind) == ("bond", "bond")  # IFF_MASTER, IFF_SLAVE
    assert (i["bond0.300"].kind, i["bond0.300"].kind_from) == ("vlan", "name")


def test_junk_inside_a_paste_is_skipped_and_elided_addresses_are_not_guessed() -> None:
    text = (
        "user@gpu1:~$ ip a\n"
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default\r\n"
        "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\r\n"
        "    inet 127.0.0.1/8 scope host lo\r\n"
        "...\n"
        "\t(snipped docker stuff)\n"
        "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP   # the real NIC\n"
        "    link/ether aa:bb:cc:dd:ee:ff brd ff:ff:ff:ff:ff:ff\n"
        "    inet 10.0.x.x/24 brd 10.0.0.255 scope global eth0\n"
        "    inet 10.0.1.5/24 brd 10.0.1.255 scope global secondary eth0:1\n"
        "3: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN\n"
        "    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0\n"
    )
    net = net_of(text)
    assert list(net.interfaces) == ["lo", "eth0", "docker0"]
    assert [a.text() for a in net.interfaces["eth0"].addresses] == ["10.0.1.5/24"]
    assert net.interfaces["docker0"].state() == "no-carrier"


def test_ifconfig_infiniband_and_aliases() -> None:
    text = (
        "# written from net-tools 2.x's documented ifconfig layout, not captured\n"
        "ib0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 2044\n"
        "        inet 192.168.50.7  netmask 255.255.255.0  broadcast 192.168.50.255\n"
        "        infiniband 80:00:00:29:FE:80:00:00:00:00:00:00:00:00:00:00:00:00:00:00  "
        "txqueuelen 256  (InfiniBand)\n"
        "\n"
        "eth0:1: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500\n"
        "        inet 10.9.0.2  netmask 255.255.0.0  broadcast 10.9.255.255\n"
        "\n"
        "eth0: flags=4099<UP,BROADCAST,MULTICAST>  mtu 1500\n"
        "        inet 10.9.0.1  netmask 255.255.0.0  broadcast 10.9.255.255\n"
    )
    i = net_of(text).interfaces
    assert i["ib0"].kind == "ipoib" and i["ib0"].state() == "up"
    assert sorted(a.text() for a in i["eth0"].addresses) == ["10.9.0.1/16", "10.9.0.2/16"]
    assert i["eth0"].state() == "no-carrier"  # UP without RUNNING


def test_ip_json_with_junk_around_it() -> None:
    text = "$ ip -j addr\n" + pasted("netns-ip-j-addr.json") + "\n$ echo done\ndone\n"
    assert "eth0" in net_of(text).interfaces


def test_bsd_style_ifconfig_netmask() -> None:
    text = (
        "# written from the documented BSD/macOS ifconfig layout, not captured\n"
        "en0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500\n"
        "\tinet 192.168.7.20 netmask 0xffffff00 broadcast 192.168.7.255\n"
        "\tinet6 fe80::1c2a:5bff:fe00:1%en0 prefixlen 64 secured scopeid 0x4\n"
        "lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384\n"
    )
    en0 = net_of(text).interfaces["en0"]
    assert sorted(a.text() for a in en0.addresses) == [
        "192.168.7.20/24",
        "fe80::1c2a:5bff:fe00:1/64",
    ]
    assert en0.state() == "up" and net_of(text).interfaces["lo0"].kind == "loopback"


def test_colour_escapes_are_peeled() -> None:
    net = net_of(pasted("netns-ip-color-a.txt"))
    assert net.interfaces["eth0"].addresses[0].text() == "198.18.44.2/24"
    assert set(net.interfaces) == {"lo", "eth0", "eth1"}
