"""`--exec`: nodes reached the way `kubectl exec` / `docker exec` reach pods, with no sshd at all.

The prefix enters each namespace node with its own hostname (its own UTS namespace), as a pod
has; every sshd is stopped first, so nothing here can go through SSH.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.render.json_report import validate
from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.netns import sh

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(3, tmp_path_factory.mktemp("exec")) as c:
        for name in c.names:
            c.stop_sshd(name)
        yield c


def leftovers(c: Cluster) -> dict[str, list[str]]:
    """Every process still in a node's network namespace (there is no sshd left to count)."""
    out = {}
    for node in c.nodes:
        pids = sh("ip", "netns", "pids", node.ns.name).stdout.split()
        alive = [p for p in pids if Path(f"/proc/{p}").exists()]
        if alive:
            out[node.name] = [Path(f"/proc/{p}/cmdline").read_text() for p in alive]
    return out


def doctor(c: Cluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main([*args, "-H", c.hosts_arg(), "--python", sys.executable, "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    validate(report)
    return rc, report


def test_preflight_probes_tests_reachability_and_runs_the_allreduce_through_exec(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, report = doctor(cluster, capsys, "preflight", "--exec", cluster.exec_prefix())
    assert rc == 0, report["findings"]
    hostnames = {n: v["facts"]["system"]["hostname"] for n, v in report["nodes"].items()}
    assert hostnames == {"node1": "node1", "node2": "node2", "node3": "node3"}
    reach = report["reachability"]
    assert {s for row in reach["matrix"].values() for s in row.values()} == {"ok"}
    [mesh] = [o for o in report["outcomes"] if o["check"] == "ssh.mesh"]
    assert mesh["status"] == "skip" and "not applicable with --exec" in mesh["reason"]
    allreduce = report["allreduce"]
    assert allreduce["verified"] and allreduce["world_size"] == 3
    assert {r["host"] for r in allreduce["runs"][0]["ranks"]} == {"node1", "node2", "node3"}
    assert leftovers(cluster) == {}


def test_a_node_the_prefix_cannot_enter_is_named_and_the_others_are_reported(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prefix = cluster.exec_prefix().replace("{node}", "{node}x")  # no such pod
    hosts = "node1,node2"
    capsys.readouterr()
    rc = main(["collect", "--save-raw", str(tmp_path), "-H", hosts, "--exec", prefix])
    assert rc == 1
    assert "no such node: node1x" in capsys.readouterr().err


def test_a_stalled_node_ends_at_its_deadline_and_leaves_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = cluster.exec_prefix(stall="node2")
    started = time.monotonic()
    rc, report = doctor(
        cluster, capsys, "preflight", "--exec", prefix, "--deadline", "3", "--no-allreduce"
    )
    assert time.monotonic() - started < 30
    assert rc == 1
    assert report["nodes"]["node2"]["status"] == "failed"
    assert report["nodes"]["node2"]["failure"]["code"] == "node.timeout"
    assert [report["nodes"][n]["status"] for n in ("node1", "node3")] == ["ok", "ok"]
    named = {n for f in report["findings"] if f["severity"] == "fail" for n in f["nodes"]}
    assert named == {"node2"}
    assert leftovers(cluster) == {}


def test_a_prefix_without_the_node_or_its_tool_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["preflight", "-H", "a,b", "--exec", "kubectl exec -i pod --"]) == 2
    assert "name the node with {node}" in capsys.readouterr().err
    assert main(["preflight", "-H", "a,b", "--exec", "no-such-kubectl exec -i {node}"]) == 2
    assert "no-such-kubectl is not on PATH" in capsys.readouterr().err
    assert main(["preflight", "--exec", "/bin/sh {node}"]) == 2
    assert "give them with -H or --hostfile" in capsys.readouterr().err
