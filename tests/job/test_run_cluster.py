"""`doctor run` end to end on a real 3-node cluster: namespaces, real sshd, real torchrun (CPU,
Gloo) and Open MPI's mpirun. Needs root, like every cluster test.

One cluster serves the tests that leave it as they found it; the ones that break it (one-way
SSH, a blackholed node, a hostname on 127.0.1.1) come last in file order on a cluster of their
own, each test undoing nothing it needs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.jobs import left_behind as job_left
from tests.cluster.jobs import settle as settle_job

pytestmark = pytest.mark.cluster

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(Path(__file__).with_name("train.py"))
# torchrun, started by the doctor on every node with its placeholders filled in.
TORCHRUN = [
    PY, "-m", "torch.distributed.run", "--nnodes", "{nnodes}", "--nproc-per-node", "1",
    "--node-rank", "{node_rank}", "--master-addr", "{master_addr}",
    "--master-port", "{master_port}", TRAIN,
]  # fmt: skip
MARKS = ("train.py", "doctor-job", "orted", "torch.distributed.run")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(3, tmp_path_factory.mktemp("shared")) as c:
        yield c


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(3, tmp_path_factory.mktemp("broken")) as c:
        yield c


def doctor(c: Cluster, *args: str) -> list[str]:
    base = [PY, "-m", "doctor", "run", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    return [*base, "--python", PY, "--profile", "quick", *args]


def run(argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def settle(c: Cluster, seconds: float = 10) -> dict[str, list[str]]:
    return settle_job(c, MARKS, seconds)


def left_behind(c: Cluster) -> dict[str, list[str]]:
    return job_left(c, MARKS)


def launch_directly(c: Cluster, node: str, rank: int) -> subprocess.Popen[str]:
    """torchrun on ``node`` over OpenSSH, as a user launches it by hand, without the doctor."""
    values = {"{nnodes}": "3", "{node_rank}": str(rank), "{master_addr}": "node1"}
    values["{master_port}"] = "29500"
    argv = [values.get(w, w) for w in TORCHRUN]
    ssh = ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes", node, "timeout", "60"]
    return subprocess.Popen(
        [*ssh, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_healthy_torchrun_runs_with_the_environment_and_its_output_prefixed(
    shared: Cluster, tmp_path: Path
) -> None:
    out = run(doctor(shared, "--json", str(tmp_path / "r.json"), "--", *TORCHRUN))
    assert out.returncode == 0, out.stderr[-3000:]
    for rank, node in enumerate(shared.names):
        assert f"[{node}] rank {rank}/3 on {node}: sum 6" in out.stdout
    assert "GLOO_SOCKET_IFNAME=eth0" in out.stderr and "on every node" in out.stderr
    assert "job finished on 3 node(s)" in out.stderr
    section = json.loads((tmp_path / "r.json").read_text())["run"]
    assert section["exit_code"] == 0 and section["env"]["node2"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert settle(shared) == {}


def test_a_rank_that_raises_is_named_with_its_error(shared: Cluster, tmp_path: Path) -> None:
    failed, report = tmp_path / "failed.txt", tmp_path / "r.json"
    out = run(
        doctor(
            shared, "--grace", "3", "--logs", str(tmp_path), "--failed-hosts", str(failed),
            "--json", str(report), "--", *TORCHRUN, "--fail-rank", "1",
        )
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    assert "job failed on node2 (exit 1): ValueError: planted failure on rank 1" in out.stderr
    assert "cause: torch.elastic.worker_failed" in out.stderr
    assert "ValueError: planted failure" in (tmp_path / "node2.log").read_text()
    # node1 and node3 failed too, once their peer was gone: they only lost it. The culprit is
    # the peer their Gloo lines name by address, which the gate saw node2 hold.
    explained = json.loads(report.read_text())["run"]["explanation"]
    assert {f["node"] for f in explained["failed"]} == {"node1", "node2", "node3"}
    assert explained["culprits"] == ["node2"]
    assert failed.read_text() == "node2\n"
    assert settle(shared) == {}


def test_ctrl_c_ends_every_process_on_every_node(shared: Cluster, tmp_path: Path) -> None:
    argv = doctor(shared, "--logs", str(tmp_path), "--", *TORCHRUN, "--sleep", "120")
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            logs = [tmp_path / f"{n}.log" for n in shared.names]
            if all(p.is_file() and b": sum 6" in p.read_bytes() for p in logs):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        assert left_behind(shared), "the job should be running on the nodes"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert b"interrupted: ended the job on every node" in err
    assert settle(shared) == {}


def test_mpirun_gets_the_interface_by_x_and_mca(shared: Cluster, tmp_path: Path) -> None:
    mpirun = [
        "mpirun", "--allow-run-as-root", "-H", shared.hosts_arg(), "-np", "3",
        "--mca", "plm_rsh_args", f"-F {shared.ssh_config}",
        "sh", "-c", 'echo "$(hostname) GLOO=$GLOO_SOCKET_IFNAME BTL=$OMPI_MCA_btl_tcp_if_include"',
    ]  # fmt: skip
    base = [PY, "-m", "doctor", "run", "--ssh-config", str(shared.ssh_config), "--python", PY]
    # The mesh is the one-way test's; here it would only add node-to-node logins.
    out = run(
        [*base, "--profile", "quick", "--mesh", "off", "--logs", str(tmp_path), "--", *mpirun]
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (
        "doctor: running: mpirun -x NCCL_SOCKET_IFNAME==eth0 -x GLOO_SOCKET_IFNAME=eth0"
        in out.stderr
    )
    assert "--mca btl_tcp_if_include 198.18." in out.stderr
    for node in shared.names:  # the nodes came from mpirun's own -H
        assert f"{node} GLOO=eth0 BTL=198.18." in out.stdout
    assert settle(shared) == {}


def test_one_way_ssh_stops_the_launch_and_names_it(broken: Cluster) -> None:
    broken.break_ssh_one_way("node2", "node3")
    out = run(doctor(broken, "--profile", "full", "--no-allreduce", "--", *TORCHRUN))
    assert out.returncode == 1
    # mesh.publickey_denied, or mesh.unreachable when the nodes' ssh cannot get through at all
    assert "not launched: the gate stops at mesh." in out.stderr
    assert "node2" in out.stdout and "node3" in out.stdout
    assert settle(broken) == {}


def test_a_blackholed_node_stops_the_launch(broken: Cluster) -> None:
    broken.blackhole("node3")
    out = run(doctor(broken, "--connect-timeout", "2", "--deadline", "5", "--", *TORCHRUN))
    assert out.returncode == 1
    assert "not launched: the gate stops at " in out.stderr
    assert "ssh.timeout (node3)" in out.stderr


def test_loopback_hostname_fails_direct_but_runs_through_doctor(
    shared: Cluster, tmp_path: Path
) -> None:
    shared.hostname_loopback("node2")
    direct = [launch_directly(shared, node, rank) for rank, node in enumerate(shared.names)]
    codes = [p.wait(timeout=120) for p in direct]
    assert any(codes), "launched directly, the job should fail on the 127.0.1.1 hostname"
    assert settle(shared, 30) == {}
    out = run(doctor(shared, "--logs", str(tmp_path), "--", *TORCHRUN))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fixes " in out.stderr and "GLOO_SOCKET_IFNAME=eth0" in out.stderr
    assert "[node2] rank 1/3 on node2: sum 6" in out.stdout
    assert settle(shared) == {}
