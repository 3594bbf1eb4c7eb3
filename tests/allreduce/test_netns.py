"""The must-show scenarios on a real 3-node cluster (network namespaces, real TCP, real Gloo).

Needs root (CI runs as root): a missing capability fails these tests, it never skips them.
"""

from __future__ import annotations

import sys
import time

import pytest

from doctor.allreduce.plan import Deadlines
from doctor.allreduce.stage import Request, run_stage
from tests.allreduce.nodes import Cluster, NetnsLauncher, cluster

pytestmark = pytest.mark.cluster

SIZES = (4096, 65536)
QUICK = Deadlines(rendezvous=3, init=4, settle=1)


def request(c: Cluster, **kw: object) -> Request:
    return Request(
        nodes=tuple(n.node for n in c.nodes),
        python=sys.executable,
        sizes=SIZES,
        rendezvous_iface="eth0",
        deadlines=QUICK,
        **kw,  # type: ignore[arg-type]
    )


def test_healthy_cluster_verifies_exactly() -> None:
    with cluster(3) as c:
        stage = run_stage(request(c), NetnsLauncher(c))
        assert c.leftover() == {}
    (run,) = stage.runs
    assert run.status == "passed", run.headline()
    assert run.verified
    assert {r.host for r in run.ranks} == {"node1", "node2", "node3"}
    assert stage.findings == []
    section = stage.section()
    assert section["rendezvous"] == "node1:29500 (198.18.0.1)"
    assert (section["backend"], section["world_size"], section["verified"]) == ("gloo", 3, True)
    assert [row["bytes"] for row in section["runs"][0]["sweep"]] == list(SIZES)


def test_hostname_on_loopback_fails_as_configured_and_passes_as_recommended() -> None:
    with cluster(3) as c:
        c.resolve_self_to_loopback()
        stage = run_stage(
            request(c, recommendation={"GLOO_SOCKET_IFNAME": "eth0"}), NetnsLauncher(c)
        )
        assert c.leftover() == {}
    configured, recommended = stage.runs
    assert configured.status == "failed"
    assert all(r.phase == "init" for r in configured.ranks)
    assert any("127.0.1.1" in r.error for r in configured.ranks)
    assert recommended.status == "passed" and recommended.verified
    assert {r.env.get("GLOO_SOCKET_IFNAME") for r in recommended.ranks} == {"eth0"}
    (finding,) = stage.findings
    assert finding.code == "allreduce.failed"
    assert finding.fix is not None and finding.fix.commands == ("export GLOO_SOCKET_IFNAME=eth0",)
    assert [r["status"] for r in stage.section()["runs"]] == ["failed", "passed"]


def test_blackholed_node_ends_within_its_deadline_and_is_named() -> None:
    with cluster(3) as c:
        c.nodes[2].ns.ip("route", "add", "blackhole", "198.18.0.1")
        started = time.monotonic()
        stage = run_stage(request(c), NetnsLauncher(c))
        took = time.monotonic() - started
        assert c.leftover() == {}, "a worker survived on a node"
    (run,) = stage.runs
    assert run.status in ("failed", "timeout")
    # launch (torch import) + rendezvous deadline + grace, with room for a loaded machine
    assert took < 25
    assert run.headline().startswith(
        f"as configured: {run.status}: rank 2 (node3) never joined the rendezvous at node1:29500"
    )
    assert [r.phase for r in run.ranks[:2]] == ["init", "init"]
    (finding,) = stage.findings
    assert finding.nodes == ("node3",)


def test_a_10mbit_link_shows_in_the_bandwidth_and_names_the_slow_node() -> None:
    with cluster(3) as c:
        c.nodes[2].shape("10mbit")
        stage = run_stage(request(c), NetnsLauncher(c))
        assert c.leftover() == {}
    (run,) = stage.runs
    assert run.status == "passed", run.headline()
    rate = 10e6 / 8 / 1e9  # 10 Mbit/s in GB/s
    largest = run.sweep_rows()[-1]
    assert largest["busbw_gbps"] < 1.5 * rate
    slow = run.slow_node()
    assert slow is not None
    node, its, typical = slow
    assert node == "node3" and its < 1.5 * rate and typical > 10 * rate
    (finding,) = stage.findings
    assert finding.code == "allreduce.slow_node" and finding.nodes == ("node3",)
