"""NIC findings on real namespaces: each hazard built for real, probed, and judged."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from checks.nics import gloo_iface, mpi_iface, nccl_iface, nic_cluster, two_in_subnet
from doctor.core.model import Finding, Missing, Severity
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.nic.plan import cluster_recommendation, plan_node, with_plan
from tests.cluster.netns import Netns, netns
from tests.nic.scenarios import facts_in, library_choice, no_dad, plan_in, predicted
from tests.nic.test_netns_scenarios import attach_port, br_bridge, veth_link_local, virbr0_only

pytestmark = pytest.mark.cluster


def node_codes(check, facts: NodeFacts) -> set[str]:
    return {f.code for f in check.fn(facts)}


def gloo_findings(*facts: NodeFacts) -> list[Finding]:
    """Run the (cluster-wide) Gloo check over these facts as nodes n0, n1, ..."""
    nodes = {f"n{i}": dataclasses.replace(f, node=f"n{i}") for i, f in enumerate(facts)}
    return list(gloo_iface.fn(ClusterFacts(nodes=nodes)))


def gloo_codes(*facts: NodeFacts) -> set[str]:
    return {f.code for f in gloo_findings(*facts)}


def built(build) -> NodeFacts:
    with netns("nicc") as ns:
        no_dad(ns)
        build(ns)
        return facts_in(ns)


def test_br_bridge_is_a_container_network() -> None:
    assert "nccl.iface.container" in node_codes(nccl_iface, built(br_bridge))


def test_bridge_port_with_link_local_only() -> None:
    found = node_codes(nccl_iface, built(virbr0_only))
    assert {"nccl.iface.link_local_only", "nccl.iface.bridge"} <= found


def test_link_local_veths_in_the_socket_list() -> None:
    facts = built(veth_link_local)
    assert node_codes(nccl_iface, facts) == {"nccl.socket.link_local"}


def test_clean_node_has_no_nccl_findings() -> None:
    assert node_codes(nccl_iface, built(lambda ns: ns.add_nic("eth0", "198.18.1.1/24"))) == set()


def test_malformed_and_unmatched_variables_are_findings() -> None:
    with netns("nicc") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        bad_nccl = facts_in(ns, NCCL_SOCKET_IFNAME="=^eth0")
        bad_gloo = facts_in(ns, GLOO_SOCKET_IFNAME="^lo")
        both = facts_in(ns, OMPI_MCA_btl_tcp_if_include="eth0", OMPI_MCA_btl_tcp_if_exclude="lo")
        wide = facts_in(ns, OMPI_MCA_btl_tcp_if_include="198.18.0.0/16")
    assert {"nccl.env.malformed", "nccl.env.no_match"} <= node_codes(nccl_iface, bad_nccl)
    assert {"gloo.env.malformed", "gloo.env.no_match"} <= gloo_codes(bad_gloo)
    assert "mpi.env.both" in node_codes(mpi_iface, both)
    assert "mpi.env.no_match" in node_codes(mpi_iface, wide)


def test_two_nics_in_one_subnet() -> None:
    with netns("nicc") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.add_nic("eth1", "198.18.1.2/24")
        assert node_codes(two_in_subnet, facts_in(ns)) == {"nic.two_in_subnet"}


def test_docker0_makes_mpi_try_the_same_address() -> None:
    with netns("nicc") as ns:
        ns.add_bridge("docker0", "172.17.0.1/16")
        attach_port(ns, "docker0", "vethd0")
        ns.add_nic("eth0", "198.18.1.1/24")
        assert "mpi.iface.container" in node_codes(mpi_iface, facts_in(ns))


def test_hostname_on_127_0_1_1_makes_gloo_loopback() -> None:
    host = socket.gethostname()
    with netns("nicc") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.set_hosts(f"127.0.0.1 localhost\n127.0.1.1 {host}\n")
        trap = facts_in(ns)
        ns.set_hosts(f"127.0.0.1 localhost\n198.18.1.1 {host}\n")
        fixed = facts_in(ns)
    assert {"gloo.iface.loopback", "tp.iface.loopback"} <= gloo_codes(trap)
    assert gloo_codes(fixed) == set()
    # Loopback breaks only traffic between nodes: a one-node run warns, a multi-node run fails.
    [alone] = [f for f in gloo_findings(trap) if f.code == "gloo.iface.loopback"]
    assert alone.severity is Severity.WARN and alone.nodes == ("n0",)
    cross = [f for f in gloo_findings(trap, fixed) if f.code == "gloo.iface.loopback"]
    assert [(f.severity, f.nodes) for f in cross] == [(Severity.FAIL, ("n0",))]
    plan = plan_in_facts(fixed)
    assert (plan.gloo.bindings[0].interface, plan.gloo.bindings[0].address) == (
        "eth0",
        "198.18.1.1",
    )


def plan_in_facts(facts: NodeFacts):
    return facts.nic


def test_config_files_apply_below_the_environment(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_SOCKET_IFNAME=eth1\n")
    mca = tmp_path / ".openmpi"
    mca.mkdir()
    (mca / "mca-params.conf").write_text("# site\nbtl_tcp_if_include = eth1\n")
    with netns("nicc") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.add_nic("eth1", "198.19.1.1/24")
        from_file = plan_in(ns, NCCL_CONF_FILE=str(conf), HOME=str(tmp_path))
        env_wins = plan_in(ns, NCCL_CONF_FILE=str(conf), NCCL_SOCKET_IFNAME="eth0")
    assert library_choice(from_file) == predicted(from_file) == "eth1"
    assert library_choice(env_wins) == predicted(env_wins) == "eth0"
    assert from_file.mpi_btl.interfaces == ("eth1",)
    assert str(mca / "mca-params.conf") in from_file.mpi_btl.rule


def two_nodes(build1, build2, **variables: str) -> ClusterFacts:
    nodes = {}
    for name, build in (("node1", build1), ("node2", build2)):
        with netns("nicn") as ns:
            no_dad(ns)
            build(ns)
            nodes[name] = facts_in(ns, name, **variables)
    return ClusterFacts(nodes=nodes)


def cluster_codes(cluster: ClusterFacts) -> set[str]:
    return {f.code for f in nic_cluster.fn(cluster)}


def docker_node(ns: Netns) -> None:
    ns.add_bridge("docker0", "172.17.0.1/16")
    attach_port(ns, "docker0", "vethd0")


def test_same_address_on_every_node() -> None:
    cluster = two_nodes(docker_node, docker_node, NCCL_SOCKET_IFNAME="docker")
    assert "nic.same_address" in cluster_codes(cluster)
    assert "nccl.iface.container" in node_codes(nccl_iface, cluster.nodes["node1"])


def test_mtu_differs_on_the_chosen_subnet() -> None:
    def mtu(n: int, value: str):
        def build(ns: Netns) -> None:
            ns.add_nic("eth0", f"198.18.1.{n}/24")
            ns.ip("link", "set", "eth0", "mtu", value)

        return build

    assert "nic.mtu_mismatch" in cluster_codes(two_nodes(mtu(1, "1500"), mtu(2, "1400")))
    assert "nic.mtu_mismatch" not in cluster_codes(two_nodes(mtu(1, "1500"), mtu(2, "1500")))


def test_names_differ_between_nodes() -> None:
    cluster = two_nodes(
        lambda ns: ns.add_nic("eth0", "198.18.1.1/24"),
        lambda ns: ns.add_nic("ens5", "198.18.1.2/24"),
    )
    assert cluster_codes(cluster) == {"nic.names_differ"}
    plans = {name: facts.nic for name, facts in cluster.nodes.items()}
    # One mpirun serves both nodes: Open MPI gets the subnet, which every node has.
    assert cluster_recommendation(plans) == {
        "NCCL_SOCKET_IFNAME": "=ens5,eth0",
        "OMPI_MCA_btl_tcp_if_include": "198.18.1.0/24",
        "OMPI_MCA_oob_tcp_if_include": "198.18.1.0/24",
    }


def no_carrier_first(ns: Netns) -> None:
    """eth1 is up but its peer is down (no carrier), and it comes before eth0."""
    ns.add_veth_pair("eth1", "eth1p")
    ns.ip("addr", "add", "198.18.9.1/24", "dev", "eth1")
    ns.ip("link", "set", "eth1p", "down")
    ns.add_nic("eth0", "198.18.1.1/24")


def with_nccl_version(facts: NodeFacts, version: str) -> NodeFacts:
    """SYNTHETIC: the same node as if its libnccl were another release (only 2.32 is here)."""
    nccl = facts.nccl
    assert not isinstance(nccl, Missing)
    libs = tuple(dataclasses.replace(lib, version=version) for lib in nccl.libraries)
    return with_plan(dataclasses.replace(facts, nccl=dataclasses.replace(nccl, libraries=libs)))


def test_interface_without_carrier() -> None:
    facts = built(no_carrier_first)
    plan = plan_in_facts(facts)
    # The real 2.32 library skips eth1 (no IFF_RUNNING), as predicted.
    assert library_choice(plan) == predicted(plan) == "eth0"
    old = with_nccl_version(facts, "2.27.7")
    old_plan = plan_in_facts(old)
    assert predicted(old_plan) == "eth1"
    found = node_codes(nccl_iface, old)
    # The library on the node (really 2.32) disagrees with the 2.27 rules: that is a finding too.
    assert {"nccl.iface.down", "nccl.library.disagrees"} <= found


def test_slow_link_where_the_speed_is_known() -> None:
    facts = built(lambda ns: ns.add_nic("eth0", "198.18.1.1/24"))
    net = facts.net
    assert not isinstance(net, Missing)
    # SYNTHETIC speed: veths report a fake 10000 that the facts drop; a 1 GbE NIC says 1000.
    slow = dataclasses.replace(net.interfaces["eth0"], kind="physical", speed_mbps=1000)
    facts = with_plan(
        dataclasses.replace(
            facts, net=dataclasses.replace(net, interfaces={**net.interfaces, "eth0": slow})
        )
    )
    assert node_codes(nccl_iface, facts) == {"nccl.iface.slow"}


def default_route_on_ens6(ns: Netns) -> None:
    ns.add_nic("eth0", "198.18.1.1/24")
    ns.add_nic("ens6", "10.99.0.1/24")
    ns.ip("route", "add", "default", "via", "10.99.0.2", "dev", "ens6")


def test_recommendation_keeps_to_the_interfaces_peers_reached() -> None:
    facts = built(default_route_on_ens6)
    assert plan_node(facts).recommended.name == "ens6"  # by this node's facts alone
    reached = with_plan(facts, frozenset({"eth0"}))
    assert plan_node(facts, frozenset({"eth0"})).recommended.name == "eth0"
    [unreached] = [f for f in nccl_iface.fn(reached) if f.code == "nccl.iface.unreached"]
    assert unreached.summary.startswith("NCCL would use ens6:10.99.0.1, which not every peer")
    everything = with_plan(facts, frozenset({"eth0", "ens6"}))
    assert "nccl.iface.unreached" not in node_codes(nccl_iface, everything)
    assert "nccl.iface.unreached" not in node_codes(nccl_iface, facts)  # not tested: no claim
    gloo_on_ens6 = with_plan(
        dataclasses.replace(facts, env={**facts.env, "GLOO_SOCKET_IFNAME": "ens6"}),
        frozenset({"eth0"}),
    )
    [gloo] = [f for f in gloo_findings(gloo_on_ens6) if f.code == "gloo.iface.unreached"]
    assert "Gloo binds ens6:10.99.0.1, which not every peer reached" in gloo.summary
    assert "gloo.iface.unreached" not in gloo_codes(reached)  # by hostname: eth0's address
    mpi = [f for f in mpi_iface.fn(reached) if f.code == "mpi.iface.unreached"]
    assert [f.summary.split(" (")[0] for f in mpi] == [
        "Open MPI btl_tcp would try ens6",
        "Open MPI oob_tcp would try ens6",
    ]
    assert mpi[0].fix.commands == ("mpirun --mca btl_tcp_if_include eth0 ...",)
    assert "mpi.iface.unreached" not in node_codes(mpi_iface, facts)
    nothing = with_plan(
        dataclasses.replace(facts, env={**facts.env, "NCCL_SOCKET_IFNAME": "=bogus0"}),
        frozenset(),
    )
    assert nothing.nic.recommended is None
    [finding] = [f for f in nccl_iface.fn(nothing) if f.code == "nccl.env.no_match"]
    assert "reached by every peer" in finding.fix.text and finding.fix.commands == ()
