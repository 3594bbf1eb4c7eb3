"""TCP reachability on candidate interfaces, on the real harness (Horovod-style source check)."""

from __future__ import annotations

import pytest

from tests.cluster.test_preflight_cluster import preflight

pytestmark = pytest.mark.cluster


def test_healthy_all_pairs_reach_on_eth0(new_cluster, capsys):
    c = new_cluster(3)
    rc, report = preflight(c, capsys)
    assert rc == 0, report["findings"]
    reach = report["reachability"]
    assert reach["matrix"] == {s: {t: "ok" for t in c.names if t != s} for s in c.names}
    assert reach["proven"] == {n: ["eth0"] for n in c.names}
    for link in reach["links"]:
        # The peer saw the connection come from the sender's own eth0 address.
        assert link["seen_from"] == c.node(link["source"]).address


def test_docker0_same_address_everywhere_is_never_proven(new_cluster, capsys):
    c = new_cluster(3)
    c.add_docker0()
    _, report = preflight(c, capsys)
    reach = report["reachability"]
    assert reach["interfaces"]["node1"] == {
        "eth0": c.node("node1").address,
        "docker0": "172.17.0.1",
    }
    assert reach["proven"] == {n: ["eth0"] for n in c.names}
    [f] = [f for f in report["findings"] if f["code"] == "reach.iface_isolated"]
    assert sorted(f["nodes"]) == c.names and f["summary"].startswith(
        "docker0 (172.17.0.1) on node[1-3]"
    )
    docker = [x for x in reach["links"] if x["iface"] == "docker0"]
    assert docker and all(x["status"] == "wrong_host" for x in docker)
    assert not [f for f in report["findings"] if f["code"] in ("reach.none", "reach.partial")]


def test_interface_names_differ_per_node(new_cluster, capsys):
    c = new_cluster(3)
    c.rename_interface("node2", "ens5")
    _, report = preflight(c, capsys)
    assert report["reachability"]["proven"] == {
        "node1": ["eth0"],
        "node2": ["ens5"],
        "node3": ["eth0"],
    }


def test_an_ipv6_only_network_is_tested_and_proven(new_cluster, capsys):
    c = new_cluster(3)
    prefix = c.add_ipv6_fabric("ens7")
    rc, report = preflight(c, capsys)
    assert rc == 0, report["findings"]
    reach = report["reachability"]
    assert reach["interfaces"]["node2"] == {"eth0": c.node("node2").address, "ens7": prefix + "2"}
    assert reach["proven"] == {n: ["ens7", "eth0"] for n in c.names}
    v6 = [x for x in reach["links"] if x["iface"] == "ens7"]
    assert len(v6) == 6 and all(x["status"] == "ok" for x in v6)
    # Each connection arrived from the sender's own IPv6 address on that network.
    assert {x["seen_from"] for x in v6} == {prefix + str(i) for i in (1, 2, 3)}


def test_one_path_blocked_is_named_both_ways(new_cluster, capsys):
    c = new_cluster(3)
    c.blackhole_between("node1", "node3")  # node3 drops its replies to node1
    rc, report = preflight(c, capsys)
    assert rc == 1
    none = {
        (f["data"]["source"], f["data"]["target"]): f
        for f in report["findings"]
        if f["code"] == "reach.none"
    }
    assert set(none) == {("node1", "node3"), ("node3", "node1")}
    assert none[("node1", "node3")]["data"]["status"] == "timeout"
    assert none[("node3", "node1")]["data"]["status"] == "unreachable"
    assert report["reachability"]["matrix"]["node2"] == {"node1": "ok", "node3": "ok"}


def test_recommendation_uses_only_interfaces_peers_reached(new_cluster, capsys):
    # Each node's default route is on ens6, a link with no other node on it: by the node's own
    # facts ens6 is the best candidate; reachability proves only eth0.
    c = new_cluster(3)
    for name in c.names:
        c.add_isolated_default_route(name)
    rc, report = preflight(c, capsys, "--no-allreduce")
    reach = report["reachability"]
    assert reach["interfaces"]["node1"] == {"eth0": c.node("node1").address, "ens6": "10.99.1.1"}
    assert not [x for x in reach["links"] if x["iface"] == "ens6" and x["status"] == "ok"]
    assert reach["proven"] == {n: ["eth0"] for n in c.names}
    nics = report["nics"]
    for name in c.names:
        node = nics["nodes"][name]
        assert node["default_route"] == ["ens6"]
        assert node["proven_reachable"] == ["eth0"]
        assert node["recommendation"]["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert nics["recommendation"]["GLOO_SOCKET_IFNAME"] == "eth0"
    # NCCL itself would also spread NET/Socket traffic over ens6: a failure, named per node.
    unreached = {
        f["nodes"][0]: f for f in report["findings"] if f["code"] == "nccl.iface.unreached"
    }
    assert rc == 1 and sorted(unreached) == c.names
    assert "ens6:10.99.2.1, which not every peer reached" in unreached["node2"]["summary"]
    assert unreached["node2"]["fix"]["commands"][0] == "export NCCL_SOCKET_IFNAME==eth0"


def test_a_node_whose_listener_no_peer_reaches_is_one_finding_on_that_node(new_cluster, capsys):
    # node3's listeners are cut off (its SSH and its own connects work): every peer's connect to
    # it times out, twice (the stage, then alone). That is node3's problem, said once, on node3.
    c = new_cluster(5)
    c.break_listener("node3")
    _, report = preflight(c, capsys, "--no-allreduce")
    fails = [f for f in report["findings"] if f["severity"] == "fail"]
    assert {n for f in fails for n in f["nodes"]} == {"node3"}
    # The NIC checks add what follows for NCCL and Gloo (no interface of node3 was proven).
    [f] = [f for f in fails if f["code"].startswith("reach.")]
    assert f["code"] == "reach.listener"
    assert "node3's listener never came up" in f["summary"]
    assert len(f["evidence"]) == 4 and all("confirmed alone: timeout" in e for e in f["evidence"])
    retried = report["reachability"]["retried"]
    assert {(x["source"], x["target"]) for x in retried} == {
        (s, "node3") for s in c.names if s != "node3"
    }
    assert report["ssh_mesh"]["failures"] == []
