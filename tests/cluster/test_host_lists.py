"""--healthy-hosts and --failed-hosts on a real 4-node cluster with one node blackholed: what
`doctor preflight` and `doctor run` write is what the next launch reads. Needs root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hostlist
import pytest

from tests.cluster.harness import Cluster

pytestmark = pytest.mark.cluster

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
# The formats people mix: MPI/DeepSpeed slots, Horovod's host:N, a bare name, a comment.
HOSTFILE = "node1 slots=2\nnode2:2   # rack 2\nnode3 slots=2\nnode4\n"


def doctor(c: Cluster, command: str, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [PY, "-m", "doctor", command, "--hostfile", str(folder / "hostfile")]
    argv += ["--ssh-config", str(c.ssh_config), "--python", PY, "--connect-timeout", "3"]
    argv += ["--healthy-hosts", str(folder / "healthy"), "--failed-hosts", str(folder / "failed")]
    argv += ["--exclude", "slots"]  # CPU nodes: slots beyond their GPUs would fail every node
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False
    )


def test_preflight_and_run_write_the_vetted_nodes_around_a_blackholed_one(
    new_cluster, tmp_path: Path
) -> None:
    c = new_cluster(4)
    c.blackhole("node3")
    (tmp_path / "hostfile").write_text(HOSTFILE)

    out = doctor(c, "preflight", tmp_path, "--no-allreduce", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 1, out.stderr[-3000:]
    assert (tmp_path / "healthy").read_text() == "node1 slots=2\nnode2:2\nnode4\n"
    failed = (tmp_path / "failed").read_text()
    assert failed == "node3\n" and hostlist.expand_hostlist(failed.strip()) == ["node3"]
    assert "3 healthy node(s) written to" in out.stderr
    nodes = json.loads((tmp_path / "r.json").read_text())["nodes"]
    assert {n: v["verdict"] for n, v in nodes.items()} == {
        "node1": "pass",
        "node2": "pass",
        "node3": "fail",
        "node4": "pass",
    }
    assert nodes["node3"]["codes"][0] == "ssh.timeout"

    for name in ("healthy", "failed"):
        (tmp_path / name).unlink()
    job = [PY, "-c", "print('the job ran')"]
    out = doctor(c, "run", tmp_path, "--profile", "quick", "--", *job)
    assert out.returncode != 0 and "the job ran" not in out.stdout, out.stderr[-3000:]
    assert (tmp_path / "healthy").read_text() == "node1 slots=2\nnode2:2\nnode4\n"
    assert (tmp_path / "failed").read_text() == "node3\n"
