"""`doctor run --spares 1` for real on a 4-node cluster with node3 blackholed (namespaces, real
sshd): the gate names node3 alone, leaves it out, and the job runs on the other three and
succeeds, with torchrun (started by the doctor on each node) and with Open MPI's mpirun (its
-H and -np rewritten); with a second node blackholed, more than the spares, nothing launches.
Needs root, like every cluster test."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, make_cluster
from tests.job.test_run_cluster import PY, TORCHRUN, left_behind, run, settle

pytestmark = pytest.mark.cluster

KEPT = ("node1", "node2", "node4")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(4, tmp_path_factory.mktemp("spares")) as c:
        c.blackhole("node3")
        yield c


def doctor(c: Cluster, *args: str) -> list[str]:
    base = [PY, "-m", "doctor", "run", "--ssh-config", str(c.ssh_config), "--python", PY]
    return [*base, "--profile", "quick", "--connect-timeout", "2", "--deadline", "5", *args]


def left_out_line(stderr: str) -> str:
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("doctor: left out ")]
    return line


def test_torchrun_runs_on_the_three_nodes_kept(cluster: Cluster, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    argv = doctor(cluster, "-H", cluster.hosts_arg(), "--spares", "1", "--json", str(report))
    out = run([*argv, "--", *TORCHRUN])
    assert out.returncode == 0, out.stderr[-4000:]
    line = left_out_line(out.stderr)
    assert line.startswith("doctor: left out node3 (--spares 1): node3: ")
    # Named alone by the probe and by the allreduce's group testing.
    assert "ssh.timeout" in line and "allreduce.bad_node" in line
    assert line.endswith("; launching on 3 of 4 nodes")
    for rank, node in enumerate(KEPT):  # {node_rank} and {nnodes} for the nodes kept
        assert f"[{node}] rank {rank}/3 on {node}: sum 6" in out.stdout
    assert "node3" not in re.findall(r"^\[(\w+)\]", out.stdout, re.M)
    assert "job finished on 3 node(s)" in out.stderr
    section = json.loads(report.read_text())["run"]
    assert list(section["left_out"]) == ["node3"] and section["spares"] == 1
    assert sorted(section["nodes"]) == list(KEPT) and section["exit_code"] == 0
    assert settle(cluster) == {}


def test_mpirun_runs_on_the_three_nodes_kept(cluster: Cluster, tmp_path: Path) -> None:
    mpirun = [
        "mpirun", "--allow-run-as-root", "-H", cluster.hosts_arg(), "-np", "4",
        "--mca", "plm_rsh_args", f"-F {cluster.ssh_config}",
        "sh", "-c", 'echo "$(hostname) rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"',
    ]  # fmt: skip
    argv = doctor(cluster, "--mesh", "off", "--spares", "1", "--logs", str(tmp_path))
    out = run([*argv, "--", *mpirun])
    assert out.returncode == 0, out.stderr[-4000:]
    assert left_out_line(out.stderr).startswith("doctor: left out node3 (--spares 1): ")
    kept = "node1,node2,node4"
    assert f"doctor: for the nodes kept: -H {kept} (was {cluster.hosts_arg()}); -np 3 (was 4)" in (
        out.stderr
    )
    ran = sorted(ln for ln in out.stdout.splitlines() if " of " in ln)
    assert [ln.split()[0] for ln in ran] == list(KEPT) and all(ln.endswith(" of 3") for ln in ran)
    assert settle(cluster) == {}


def test_more_bad_nodes_than_spares_launch_nothing(cluster: Cluster, tmp_path: Path) -> None:
    cluster.blackhole("node4")  # last in this module: two nodes down now
    argv = doctor(cluster, "-H", cluster.hosts_arg(), "--spares", "1", "--logs", str(tmp_path))
    out = run([*argv, "--", *TORCHRUN])
    assert out.returncode == 1, out.stderr[-4000:]
    assert "doctor: --spares 1: nothing left out: 2 nodes fail (node[3-4]), more than 1" in (
        out.stderr
    )
    assert "not launched: the gate stops at " in out.stderr
    assert not list(tmp_path.glob("*.log")) and left_behind(cluster) == {}
