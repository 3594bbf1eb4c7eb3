"""The harness itself: every failure builder does what it says, and nothing is left behind."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster.harness import LOCK_DIR, make_cluster

pytestmark = pytest.mark.cluster


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_cleanup_even_when_the_test_fails(tmp_path):
    before = _netns()
    with pytest.raises(RuntimeError), make_cluster(2, tmp_path) as c:
        names = {n.ns.name for n in c.nodes}
        pids = [n.sshd.pid for n in c.nodes if n.sshd]
        lock = LOCK_DIR / str(c.third)
        assert names <= _netns() and lock.exists()
        raise RuntimeError("test failed")
    assert _netns() == before
    assert not lock.exists()
    for pid in pids:
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    link = subprocess.run(["ip", "link", "show", c.bridge], capture_output=True, text=True)
    assert link.returncode != 0


def test_two_clusters_get_different_subnets(new_cluster):
    a, b = new_cluster(1), new_cluster(1)
    assert a.subnet != b.subnet


def test_nodes_have_own_hostname_hosts_and_mesh(new_cluster):
    c = new_cluster(3)
    out = c.ssh("node1", "hostname; getent hosts node3; ssh -o BatchMode=yes node2 hostname")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["node1", c.node("node3").address, "node3", "node2"]


def test_one_way_ssh_break(new_cluster):
    c = new_cluster(3)
    c.break_ssh_one_way("node2", "node3")
    bad = c.ssh("node2", "ssh -o BatchMode=yes node3 true")
    assert bad.returncode == 255 and "Permission denied (publickey)" in bad.stderr
    assert c.ssh("node3", "ssh -o BatchMode=yes node2 true").returncode == 0
    assert c.ssh("node1", "ssh -o BatchMode=yes node3 true").returncode == 0


def test_hostname_loopback_and_unresolvable(new_cluster):
    c = new_cluster(2)
    c.hostname_loopback("node1")
    c.unresolvable_on("node2", "node1")
    assert c.ssh("node1", "getent hosts node1").stdout.split()[0] == "127.0.1.1"
    assert c.ssh("node2", "getent hosts node1").returncode == 2


def test_interfaces_shaping_mtu_docker0(new_cluster):
    c = new_cluster(2)
    c.rename_interface("node2", "ens5")
    c.add_docker0()
    c.set_mtu("node1", 1400)
    c.shape("node1", "10mbit")
    links = c.node("node2").ns.ip("-br", "addr").stdout
    assert "ens5" in links and c.node("node2").address in links and "172.17.0.1/16" in links
    assert "mtu 1400" in c.node("node1").ns.ip("link", "show", "eth0").stdout
    qdisc = c.node("node1").run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    assert "tbf" in qdisc and "rate 10Mbit" in qdisc
    assert c.ssh("node1", "ssh -o BatchMode=yes node2 true").returncode == 0


def test_small_shm_is_per_node(new_cluster):
    c = new_cluster(2, small_shm=("node2",))
    sizes = {
        n: c.ssh(n, "df -B1M --output=size /dev/shm | tail -1").stdout.strip() for n in c.names
    }
    assert sizes["node2"] == "64"
    assert sizes["node1"] != "64"
