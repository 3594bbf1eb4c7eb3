"""Group testing on a real 8-node cluster (namespaces, real sshd, real Gloo over TCP): a node
whose link runs at 10 Mbit/s, and a blackholed node, each named alone, by rounds of small
allreduces run at once on disjoint groups. Needs root, like every cluster test."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from doctor.core.model import Severity
from doctor.facts.allreduce import Deadlines
from doctor.facts.groups import GroupSearch
from doctor.nodes.inventory import build_inventory
from doctor.nodes.transport import SshOptions
from doctor.nodes.transport.ssh import SshTransport
from doctor.nodes.transport.ssh_launch import SshLauncher
from doctor.stages.allreduce.stage import Job
from tests.allreduce.stagekit import Staged, run_stage
from tests.allreduce.test_cluster import workers_left
from tests.cluster.harness import Cluster, make_cluster

import pytest  # isort: skip

pytestmark = pytest.mark.cluster

NODES = 8


def stage(c: Cluster, connect_timeout: float = 10, **kw: object) -> Staged:
    nodes = build_inventory(hosts=c.hosts_arg(), ssh_config=c.ssh_config)
    job = Job(
        nodes=tuple(nodes),
        python=sys.executable,
        rendezvous_iface="eth0",
        **{"sizes": (4096, 256 << 10), "deadlines": Deadlines(settle=1), **kw},  # type: ignore[arg-type]
    )
    with SshTransport(SshOptions(connect_timeout=connect_timeout)) as transport:
        return run_stage(job, SshLauncher(transport, timeout=connect_timeout))


def fails(result: Staged) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.code, f.nodes) for f in result.findings if f.severity is Severity.FAIL]


def rounds_disjoint(search: GroupSearch) -> bool:
    for r in range(1, search.rounds + 1):
        nodes = [n for t in search.tests if t.round == r for n in t.nodes]
        if len(nodes) != len(set(nodes)):
            return False
    return True


def test_a_10mbit_node_of_8_is_named_alone_by_group_testing(tmp_path: Path) -> None:
    with make_cluster(NODES, tmp_path) as c:
        c.shape("node6", "10mbit")
        started = time.monotonic()
        result = stage(c)
        took = time.monotonic() - started
        assert workers_left(c) == {}
    search = result.facts.search
    assert search is not None, result.runs[0].headline()
    print(f"\n10mbit: {search.summary()}; stage {took:.1f}s")
    for t in search.tests:
        print("  " + t.line())
    assert search.mode == "slow" and search.named == ("node6",), search.unresolved
    assert rounds_disjoint(search)
    # Quarters (pairs), then each node of the slow pair with a node known good.
    assert search.rounds == 2 and search.unresolved == ""
    assert ("allreduce.slow_member", ("node6",)) in fails(result)
    assert {n for _, nodes in fails(result) for n in nodes} == {"node6"}


def test_a_blackholed_node_of_8_is_named_alone_by_group_testing(tmp_path: Path) -> None:
    with make_cluster(NODES, tmp_path) as c:
        c.blackhole("node3")
        started = time.monotonic()
        result = stage(c, connect_timeout=3)
        took = time.monotonic() - started
        assert workers_left(c) == {}
    search = result.facts.search
    assert search is not None, result.runs[0].headline()
    print(f"\nblackhole: {search.summary()}; stage {took:.1f}s")
    for t in search.tests:
        print("  " + t.line())
    assert search.mode == "fail" and search.named == ("node3",), search.unresolved
    assert rounds_disjoint(search) and search.rounds == 2
    assert ("allreduce.bad_node", ("node3",)) in fails(result)
    assert {n for _, nodes in fails(result) for n in nodes} == {"node3"}
    section = result.section()["search"]
    assert section["bad_nodes"] == ["node3"] and section["tests"] == len(search.tests)
