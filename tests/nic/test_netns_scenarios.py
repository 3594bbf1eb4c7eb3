"""On real interfaces in network namespaces: the predicted NCCL bootstrap interface equals what
the real libnccl (nvidia-nccl-cu12) chooses there, for every interference scenario and every
NCCL_SOCKET_IFNAME form. Needs root; without it these fail, they never skip."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from doctor.nic.nccl import decode_unique_id
from tests.cluster.netns import Netns, netns
from tests.nic.scenarios import library_choice, no_dad, plan_in, predicted

pytestmark = pytest.mark.cluster


def attach_port(ns: Netns, bridge: str, port: str) -> None:
    """A running container's veth on the bridge: gives the bridge carrier (IFF_RUNNING)."""
    ns.add_nic(port)
    ns.ip("link", "set", port, "master", bridge)


def one_nic(ns: Netns) -> None:
    ns.add_nic("eth0", "198.18.1.1/24")


def veth_link_local(ns: Netns) -> None:
    ns.add_veth_pair("vethA", "vethB")  # created before eth0: first in getifaddrs order
    ns.add_nic("eth0", "198.18.1.1/24")
    ns.add_veth_pair("vethC", "vethD")


def docker0(ns: Netns) -> None:
    ns.add_bridge("docker0", "172.17.0.1/16")
    attach_port(ns, "docker0", "vethd0")
    ns.add_nic("eth0", "198.18.1.1/24")


def br_bridge(ns: Netns) -> None:
    ns.add_bridge("br-5a1f09c2", "198.19.7.1/24")
    attach_port(ns, "br-5a1f09c2", "vethb0")
    ns.add_nic("eth0", "198.18.1.1/24")


def virbr0_only(ns: Netns) -> None:
    ns.add_bridge("virbr0", "198.19.122.1/24")
    attach_port(ns, "virbr0", "vnet0")


def virbr0(ns: Netns) -> None:
    virbr0_only(ns)
    ns.add_nic("eth0", "198.18.1.1/24")


def created_before_eth0(ns: Netns) -> None:
    ns.add_nic("ens9", "198.19.9.1/24")
    ns.add_nic("eth0", "198.18.1.1/24")


def ib_name(ns: Netns) -> None:
    ns.add_nic("eth0", "198.18.1.1/24")
    ns.add_nic("ib0", "198.19.64.1/24")


def ipv6_only(ns: Netns) -> None:
    # 2001:2::/48 is the IPv6 benchmarking range (RFC 5180), the twin of 198.18.0.0/15.
    ns.add_nic("eth0", "2001:2::1/64")


SCENARIOS: dict[str, tuple[Callable[[Netns], None], str]] = {
    "one NIC": (one_nic, "eth0"),
    "veth pairs with only fe80::": (veth_link_local, "eth0"),
    "docker0 172.17.0.1/16": (docker0, "eth0"),
    "br-* bridge before eth0": (br_bridge, "br-5a1f09c2"),
    "virbr0 before eth0": (virbr0, "eth0"),
    "virbr0 only: its port's fe80:: wins": (virbr0_only, "vnet0"),
    "interface created before eth0": (created_before_eth0, "ens9"),
    "a name starting with ib": (ib_name, "ib0"),
    "IPv6 only": (ipv6_only, "eth0"),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prediction_matches_real_nccl(name: str) -> None:
    build, expected = SCENARIOS[name]
    with netns("nics") as ns:
        no_dad(ns)
        build(ns)
        plan = plan_in(ns)
    assert library_choice(plan) == predicted(plan) == expected, plan.library
    # The unique id carries the same listen address the log line names.
    lib = plan.library
    assert lib is not None and lib.id_address is not None
    assert lib.id_address.address == plan.bootstrap.first.address  # type: ignore[union-attr]
    assert lib.id_interface == expected


def test_link_local_veths_reach_the_socket_list() -> None:
    with netns("nics") as ns:
        no_dad(ns)
        veth_link_local(ns)
        plan = plan_in(ns)
    names = [a.name for a in plan.socket.interfaces]
    assert names[0] == "eth0" and {"vethA", "vethB", "vethC", "vethD"} <= set(names)
    assert all(a.link_local for a in plan.socket.interfaces[1:])


@pytest.fixture(scope="module")
def two_nics() -> Iterator[Netns]:
    """eth0, eth1 and a docker0 with a container: one namespace for every grammar form."""
    with netns("nicg") as ns:
        no_dad(ns)
        ns.add_bridge("docker0", "172.17.0.1/16")
        attach_port(ns, "docker0", "vethd0")
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.add_nic("eth1", "198.19.1.1/24")
        yield ns


GRAMMAR = {
    "eth": "eth0",  # prefix: the first match in getifaddrs order
    "eth1": "eth1",
    "=eth1": "eth1",
    "eth1,eth0": "eth0",  # the list order does not matter, getifaddrs order does
    "=eth": None,  # exact: no interface is called "eth"
    "^eth0": "lo",  # excluding eth0 leaves lo first
    "^=lo,eth0": "docker0",
    "^lo,docker,eth0": "eth1",
    "e": "eth0",  # one character: ignored, automatic selection
    "doc": "docker0",
    "nope": None,
}


@pytest.mark.parametrize("value", list(GRAMMAR))
def test_socket_ifname_forms(two_nics: Netns, value: str) -> None:
    plan = plan_in(two_nics, NCCL_SOCKET_IFNAME=value)
    assert library_choice(plan) == predicted(plan) == GRAMMAR[value], plan.library
    if GRAMMAR[value] is None:
        assert plan.library is not None and plan.library.logged.warning
        assert plan.bootstrap.error == plan.library.logged.warning


@pytest.mark.parametrize(
    ("comm_id", "expected"),
    [("198.19.1.77:29500", "eth1"), ("198.18.1.9:29500", "eth0"), ("127.0.0.1:29500", "lo")],
)
def test_comm_id_subnet_match(two_nics: Netns, comm_id: str, expected: str) -> None:
    plan = plan_in(two_nics, NCCL_COMM_ID=comm_id)
    assert library_choice(plan) == predicted(plan) == expected
    # With NCCL_COMM_ID the id holds the root's address, not a local listener.
    lib = plan.library
    assert lib is not None and lib.id_address is not None
    assert lib.id_address.address == comm_id.split(":")[0]


def test_socket_family_forces_ipv6(two_nics: Netns) -> None:
    plan = plan_in(two_nics, NCCL_SOCKET_FAMILY="AF_INET6")
    # Only link-local IPv6 addresses exist here besides ::1, which NCCL skips.
    assert library_choice(plan) == predicted(plan)
    assert plan.bootstrap.first is not None and plan.bootstrap.first.link_local


def test_unique_id_decodes_to_the_listener(two_nics: Netns) -> None:
    plan = plan_in(two_nics)
    lib = plan.library
    assert lib is not None and lib.id_address is not None and lib.id_address.port > 0
    assert decode_unique_id("00" * 128) is None
