"""Interface kinds in pasted listings: what the text shows, else a guess from the name that says
it is one (doctor/facts/network/ifkind.py, the classifier the probe's sysfs path uses too)."""

from __future__ import annotations

from rich.console import Console

from doctor.facts.network.ifkind import Evidence, IfKind, classify
from doctor.facts.network.net import NetFacts, parse_net
from doctor.facts.node import parse_node
from doctor.nic.plan import plan_node
from doctor.render.nics import render_table
from tests.paste.pastekit import pasted, read_text

HOST, POD = pasted("written-ip-a-nic-names.txt").split("=== a pod\n")


def kinds(text: str) -> dict[str, tuple[str, str]]:
    net = parse_net(read_text(text))
    assert isinstance(net, NetFacts), net
    return {name: (i.kind, i.kind_from) for name, i in net.interfaces.items()}


def test_a_gpu_server_s_interfaces_are_none_unknown() -> None:
    assert kinds(HOST) == {
        "lo": ("loopback", "text"),
        "eno1": ("physical", "name"),
        "ens11f0": ("physical", "name"),
        "enp65s0f1np1": ("physical", "name"),
        "ib0": ("ipoib", "text"),  # link/infiniband
        "bond0": ("bond", "text"),  # IFF_MASTER
        "ens5.100": ("vlan", "name"),
        "docker0": ("bridge", "name"),
        "virbr0": ("bridge", "name"),
        "cni0": ("bridge", "name"),
        "flannel.1": ("vxlan", "name"),
        "cali1a2b3c4d5e6": ("veth", "name"),
        "tailscale0": ("tun", "name"),
        "wg0": ("wireguard", "name"),
        "gpu0rdma0": ("physical", "name"),
    }


def test_a_pod_s_eth0_is_its_veth_and_multus_net1_a_vf() -> None:
    assert kinds(POD) == {
        "lo": ("loopback", "text"),
        "eth0": ("veth", "name"),  # eth0@if12: the host end is in another namespace
        "net1": ("physical", "name"),  # an SR-IOV VF Multus moved into the pod
    }


def test_what_the_kernel_says_is_never_a_guess() -> None:
    # The probe's evidence: sysfs's device link decides, whatever the name.
    assert classify("docker0", Evidence(device=True)) == IfKind("physical")
    assert classify("eth0", Evidence(device=False)) == IfKind("virtual")
    assert classify("eth0", Evidence(info={"info_kind": "veth"})) == IfKind("veth")
    assert classify("ib0.8001", Evidence()) == IfKind("ipoib", guessed=True)  # a P_Key child
    assert classify("bond0.300", Evidence()) == IfKind("vlan", guessed=True)
    assert classify("mv0", Evidence()) == IfKind("unknown")
    assert classify("p0", Evidence()) == IfKind("physical", guessed=True)  # a BlueField uplink
    assert classify("pod0", Evidence()) == IfKind("unknown")


def test_ip_d_details_win_over_the_name() -> None:
    i = kinds(pasted("written-ip-d-bond-vlan.txt"))
    assert i["bond0.300"] == ("vlan", "text") and i["ib0"] == ("ipoib", "text")


def test_the_nics_table_marks_a_guessed_kind() -> None:
    console = Console(record=True, width=160)
    render_table({"pod": plan_node(parse_node("pod", read_text(POD)))}, console)
    text = console.export_text()
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines() if line[:2] == "  "}
    assert (rows["lo"], rows["eth0"], rows["net1"]) == ("loopback", "veth?", "physical?")
    assert "kind?: guessed from the name" in text


def test_an_interface_s_kind_comes_from_evidence_never_physical_by_default() -> None:
    # ifconfig in a pod: eth0 shows nothing of what it is, but Multus's net1 says this is a pod,
    # whose eth0 is the pod network's; without net1 an eth0 is unknown, not a guessed NIC.
    pod = pasted("written-ifconfig-pod.txt")
    assert kinds(pod) == {
        "lo": ("loopback", "text"),
        "eth0": ("virtual", "name"),
        "net1": ("physical", "name"),
    }
    alone = pod.split("\nlo:")[0] + "\n"
    assert kinds(alone) == {"eth0": ("unknown", "text")}
    assert classify("eth3", Evidence()) == IfKind("unknown")


def test_ip_d_s_parent_bus_is_a_device() -> None:
    # iproute2 5.x `ip -d link` prints the parent device of a NIC (or a VF) on a bus.
    text = (
        "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT\n"
        "    link/ether 0c:42:a1:5e:00:10 brd ff:ff:ff:ff:ff:ff promiscuity 0 minmtu 68 "
        "maxmtu 9978 numtxqueues 64 numrxqueues 63 gso_max_size 65536 gso_max_segs 65535 "
        "parentbus pci parentdev 0000:3b:00.0\n"
    )
    assert kinds(text) == {"eth0": ("physical", "text")}
