"""The must-show scenarios on a real 3-node cluster: namespaces, real sshd, real TCP, real Gloo.

Ranks start over the SSH transport, as on a real cluster. Needs root (CI runs as root): a missing
capability fails these tests, it never skips them.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.core.model import Finding, Severity
from doctor.facts.allreduce import Deadlines
from doctor.nodes.inventory import build_inventory
from doctor.nodes.transport import SshOptions
from doctor.nodes.transport.ssh import SshTransport
from doctor.nodes.transport.ssh_launch import SshLauncher
from doctor.stages.allreduce.stage import Job as Request
from tests.allreduce.stagekit import Staged as StageResult
from tests.allreduce.stagekit import run_stage
from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.netns import sh

pytestmark = pytest.mark.cluster

SIZES = (4096, 65536)
# Short where a test waits for a failure, the defaults where it waits for success (a loaded
# 2-core CI machine can take seconds to import torch three times and connect Gloo).
LENIENT = Deadlines(settle=1)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with make_cluster(3, tmp_path) as c:
        yield c


def workers_left(c: Cluster) -> dict[str, list[int]]:
    """Allreduce workers still in each node's process table (zombies count as gone)."""
    left = {}
    for node in c.nodes:
        pids = []
        for pid in sh("ip", "netns", "pids", node.ns.name).stdout.split():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"allreduce-worker" in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(pid))
        if pids:
            left[node.name] = pids
    return left


def ours(result: StageResult) -> list[Finding]:
    """The stage's own findings, without the log diagnosis of failed runs."""
    return [f for f in result.findings if f.code.startswith("allreduce.")]


def stage(c: Cluster, connect_timeout: float = 10, **kw: object) -> StageResult:
    nodes = build_inventory(hosts=c.hosts_arg(), ssh_config=c.ssh_config)
    request = Request(
        nodes=tuple(nodes),
        python=sys.executable,
        rendezvous_iface="eth0",
        **{"sizes": SIZES, "deadlines": LENIENT, **kw},  # type: ignore[arg-type]
    )
    with SshTransport(SshOptions(connect_timeout=connect_timeout)) as transport:
        return run_stage(request, SshLauncher(transport, timeout=connect_timeout))


def test_healthy_cluster_verifies_exactly(cluster: Cluster) -> None:
    result = stage(cluster)
    assert workers_left(cluster) == {}
    (run,) = result.runs
    assert run.status == "passed", run.headline()
    assert run.verified
    assert [r.host for r in run.ranks] == ["node1", "node2", "node3"]
    assert result.findings == []
    section = result.section()
    assert section["rendezvous"] == f"node1:29500 ({cluster.subnet}.1)"
    assert (section["backend"], section["world_size"], section["verified"]) == ("gloo", 3, True)
    assert [row["bytes"] for row in section["runs"][0]["sweep"]] == list(SIZES)


def test_hostname_on_loopback_fails_as_configured_and_passes_as_recommended(
    cluster: Cluster,
) -> None:
    for name in cluster.names:
        cluster.hostname_loopback(name)
    # Gloo retries refused connects until its timeout: the init deadline bounds the failing run.
    result = stage(
        cluster,
        recommendation={"GLOO_SOCKET_IFNAME": "eth0"},
        deadlines=Deadlines(init=8, settle=1),
    )
    assert workers_left(cluster) == {}
    configured, recommended = result.runs
    assert configured.status == "failed"
    assert all(r.phase == "init" for r in configured.ranks)
    assert any("127.0.1.1" in r.error for r in configured.ranks)
    assert recommended.status == "passed" and recommended.verified
    assert {r.env.get("GLOO_SOCKET_IFNAME") for r in recommended.ranks} == {"eth0"}
    (finding,) = ours(result)
    assert finding.code == "allreduce.failed"
    # The ranks' own output went through the log diagnosis, which names the same cause.
    assert "gloo.loopback_address" in {f.code for f in result.findings if f not in ours(result)}
    assert finding.fix is not None and finding.fix.commands == ("export GLOO_SOCKET_IFNAME=eth0",)
    assert [r["status"] for r in result.section()["runs"]] == ["failed", "passed"]


def test_blackholed_node_ends_within_its_deadline_and_is_named(cluster: Cluster) -> None:
    cluster.blackhole("node3")
    started = time.monotonic()
    result = stage(cluster, connect_timeout=3)
    took = time.monotonic() - started
    assert workers_left(cluster) == {}, "a worker survived on a node"
    (run,) = result.runs
    assert run.status == "failed"
    # SSH connect deadline + settle, with room for a loaded 2-core machine; not minutes.
    assert took < 30
    assert run.headline().startswith("as configured: failed: rank 2 (node3) never started: ")
    assert "within 3s" in run.headline()
    assert all(r.phase in ("launch", "rendezvous", "init") for r in run.ranks[:2])
    (finding,) = ours(result)
    assert finding.nodes == ("node3",)


def test_a_rank_stuck_at_the_rendezvous_is_named(cluster: Cluster) -> None:
    # node3 answers SSH but cannot reach node1: its rank never joins the rendezvous.
    cluster.node("node3").ns.ip("route", "add", "blackhole", f"{cluster.subnet}.1")
    result = stage(cluster, deadlines=Deadlines(rendezvous=3, settle=1))
    assert workers_left(cluster) == {}, "a worker survived on a node"
    (run,) = result.runs
    assert run.headline().startswith(
        f"as configured: {run.status}: rank 2 (node3) never joined the rendezvous at node1:29500"
    )
    assert [r.phase for r in run.ranks] == ["init", "init", "rendezvous"]


def test_rank_zero_slow_to_start_is_a_slow_start_and_a_longer_launch_deadline_holds(
    cluster: Cluster,
) -> None:
    # node1, which holds the rendezvous store, gets 5 % of a CPU: its rank imports torch in
    # about 30 s where the others take 2. Issue 38: the others timed out reaching the store (15 s)
    # and the report blamed MASTER_ADDR; --launch-timeout 120 still stopped the run at 19 s.
    cluster.starve("node1", 5)
    started = time.monotonic()
    result = stage(cluster, deadlines=Deadlines(launch=12, settle=1))
    assert workers_left(cluster) == {}
    (run,) = result.runs
    assert run.status == "timeout" and run.slow_start, run.headline()
    assert 12 <= time.monotonic() - started < 12 + 2 + 10
    assert [r.rank for r in run.behind()] == [0]
    assert not any(r.error for r in run.ranks)
    (finding,) = result.findings  # the slow start only: no store, no MASTER_ADDR
    assert (finding.code, finding.severity) == ("allreduce.slow_start", Severity.WARN)
    assert "node1" in finding.nodes or not finding.nodes  # named unless most ranks were slow
    assert finding.evidence[0].startswith("rank 0 (node1) ")

    # Long enough for a 5 % share of a CPU on a loaded machine (the whole suite beside it took
    # rank 0 past 120 s once; quiet, the run passes in about 60 s): a deadline, not a wait.
    result = stage(cluster, deadlines=Deadlines(launch=400, settle=1))
    assert workers_left(cluster) == {}
    (run,) = result.runs
    assert run.status == "passed" and run.verified, run.headline()
    assert result.findings == []
    rank0, *others = run.ranks
    assert rank0.ready_s is not None and all(r.ready_s is not None for r in others)
    assert rank0.ready_s > max(r.ready_s for r in others if r.ready_s is not None)


def test_a_10mbit_link_shows_in_the_bandwidth_and_names_the_slow_node(cluster: Cluster) -> None:
    cluster.shape("node3", "10mbit")
    result = stage(cluster, sizes=(4096, 256 << 10))
    assert workers_left(cluster) == {}
    (run,) = result.runs
    assert run.status == "passed", run.headline()
    rate = 10e6 / 8 / 1e9  # 10 Mbit/s in GB/s
    assert run.sweep_rows()[-1]["busbw_gbps"] < 1.5 * rate
    slow = run.slow_node()
    assert slow is not None, run.link_rows()
    node, its, typical = slow
    assert node == "node3" and its < 1.5 * rate and typical > 5 * rate
    (finding,) = result.findings
    assert finding.code == "allreduce.slow_node" and finding.nodes == ("node3",)


def test_doctor_allreduce_over_ssh_end_to_end(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["allreduce", "-H", cluster.hosts_arg(), "--ssh-config", str(cluster.ssh_config)]
    argv += ["--python", sys.executable, "--sizes", "4K", "--iface", "eth0", "-f", "json"]
    assert main(argv) == 0
    assert workers_left(cluster) == {}
    section = json.loads(capsys.readouterr().out)["allreduce"]
    assert (section["status"], section["world_size"], section["verified"]) == ("passed", 3, True)
    assert [r["host"] for r in section["runs"][0]["ranks"]] == ["node1", "node2", "node3"]
