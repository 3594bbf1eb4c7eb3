"""Hung jobs on a real 3-node cluster (namespaces, real sshd, real torchrun and Gloo, 2 ranks a
node): `doctor stacks` on a job launched with plain torchrun over ssh, and `doctor run
--hang-after` on one the doctor launched. Each shape of hang names the right rank and node and
nothing else, and nothing is left running. The job is tests/hang/job.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.jobs import end_job, settle

pytestmark = pytest.mark.cluster

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
JOB = str(Path(__file__).with_name("job.py"))
JOB_MARKS = ("hang/job.py", "torch.distributed.run")
MARKS = (*JOB_MARKS, "doctor-job", "doctor-stacks")
TORCHRUN = [
    PY, "-m", "torch.distributed.run", "--nnodes", "{nnodes}", "--nproc-per-node", "2",
    "--node-rank", "{node_rank}", "--master-addr", "{master_addr}",
    "--master-port", "{master_port}", JOB,
]  # fmt: skip


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with make_cluster(3, tmp_path_factory.mktemp("hang")) as c:
        yield c


@pytest.fixture
def clean(bed: Cluster) -> Iterator[Cluster]:
    yield bed
    assert settle(bed, MARKS, 30) == {}, "the job or the doctor left processes behind"


class Job:
    """Plain torchrun over OpenSSH on every node, as a user launches it without the doctor."""

    def __init__(self, c: Cluster, folder: Path, *args: str, port: int = 29611) -> None:
        self.c, self.folder = c, folder
        self.procs = []
        for rank, node in enumerate(c.names):
            values = {"{nnodes}": "3", "{node_rank}": str(rank), "{master_addr}": "node1"}
            values["{master_port}"] = str(port)
            argv = [values.get(w, w) for w in TORCHRUN] + list(args)
            ssh = ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes", node, "timeout", "300"]
            log = (folder / f"{node}.log").open("wb")
            self.procs.append(subprocess.Popen([*ssh, *argv], stdout=log, stderr=log))

    def wait_for(self, text: str, count: int, seconds: float = 180) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            logs = b"".join(p.read_bytes() for p in self.folder.glob("node*.log"))
            if logs.count(text.encode()) >= count:
                return
            time.sleep(0.5)
        raise AssertionError(f"{text!r} not seen {count} times: {logs[-3000:]!r}")

    def end(self) -> None:
        end_job(self.c, JOB_MARKS)  # the ssh sessions end with their remote commands
        for proc in self.procs:
            proc.wait(timeout=60)


def line_of(text: str) -> int:
    """The line of tests/hang/job.py that holds ``text`` (the frames the doctor names)."""
    lines = Path(JOB).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def stacks(c: Cluster, *args: str) -> tuple[int, dict[str, Any], str]:
    argv = [PY, "-m", "doctor", "stacks", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    out = subprocess.run(
        [*argv, "--python", PY, "-f", "json", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    return out.returncode, json.loads(out.stdout), out.stderr


def hang_findings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in report["findings"] if f["check"] == "hang"}


def hung(
    c: Cluster, tmp_path: Path, mode: str, *args: str, doctor: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """The job hung as ``mode`` with plain torchrun; what `doctor stacks` says of it."""
    job = Job(c, tmp_path, "--mode", mode, *args)
    try:
        job.wait_for("steps done", 6 if mode != "fifo" else 5)
        time.sleep(2)  # the ranks reach their last step
        code, report, err = stacks(c, *doctor)
        assert code == 1, err
        return hang_findings(report)
    finally:
        job.end()


ALLREDUCE = line_of("dist.all_reduce(x)")


def test_a_sleeping_rank_is_named_by_doctor_stacks(clean: Cluster, tmp_path: Path) -> None:
    found = hung(clean, tmp_path, "sleep", "--rank", "3")
    assert list(found) == ["hang.outside_collective"]
    finding = found["hang.outside_collective"]
    assert finding["nodes"] == ["node2"] and finding["data"]["ranks"] == [3]
    assert f"job.py:{line_of('time.sleep(3600)')} <module>, sleeping" in finding["summary"]
    waiting = f"5 wait: ranks 0-2,4-5 (node[1-3]): all_reduce called at job.py:{ALLREDUCE}"
    assert waiting in finding["evidence"][-1]


def test_doctor_stacks_reaches_the_nodes_through_exec_too(clean: Cluster, tmp_path: Path) -> None:
    """As through kubectl exec into pods: no sshd, the agent on stdin through the prefix."""
    found = hung(clean, tmp_path, "sleep", "--rank", "3", doctor=("--exec", clean.exec_prefix()))
    assert list(found) == ["hang.outside_collective"]
    assert found["hang.outside_collective"]["nodes"] == ["node2"]


def test_a_rank_whose_dataloader_worker_blocks_on_a_fifo(clean: Cluster, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    found = hung(clean, tmp_path, "fifo", "--rank", "5", "--fifo", str(fifo))
    finding = found["hang.outside_collective"]
    assert finding["nodes"] == ["node3"] and finding["data"]["ranks"] == [5]
    assert "waiting for its DataLoader" in finding["summary"]
    assert "Blocked.__getitem__, waiting on a pipe or FIFO" in finding["summary"]


def test_a_broadcast_against_the_others_allreduce(clean: Cluster, tmp_path: Path) -> None:
    found = hung(clean, tmp_path, "op", "--rank", "2")
    assert list(found) == ["hang.mismatch"]
    finding = found["hang.mismatch"]
    assert finding["nodes"] == ["node2"]
    assert finding["data"]["sides"] == {
        f"all_reduce called at job.py:{ALLREDUCE} allreduce": [0, 1, 3, 4, 5],
        f"broadcast called at job.py:{line_of('dist.broadcast(')} <module>": [2],
    }


def test_a_rank_killed_before_it_joined_is_gone(clean: Cluster, tmp_path: Path) -> None:
    job = Job(clean, tmp_path, "--mode", "vanish", "--rank", "4")
    try:
        time.sleep(15)  # node3's torchrun ends its other worker; the rest wait in the rendezvous
        _, report, _ = stacks(clean)
    finally:
        job.end()
    found = hang_findings(report)
    assert list(found) == ["hang.rank_gone"]
    assert found["hang.rank_gone"]["nodes"] == ["node3"]
    assert found["hang.rank_gone"]["data"]["ranks"] == [4, 5]
    init = f"init_process_group called at job.py:{line_of('dist.init_process_group(')}"
    assert init in found["hang.rank_gone"]["summary"]


def test_no_job_at_all_is_said_in_one_line_per_node(clean: Cluster) -> None:
    code, report, _ = stacks(clean)
    assert code == 0
    (outcome,) = [o for o in report["outcomes"] if o["check"] == "hang"]
    assert outcome["status"] == "skip" and "no rank of a training job" in outcome["reason"]


def doctor_run(c: Cluster, logs: Path, *args: str, after: str = "8") -> list[str]:
    base = [PY, "-m", "doctor", "run", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    base += ["--python", PY, "--profile", "quick", "--mesh", "off", "--logs", str(logs)]
    return [
        *base,
        "--hang-after",
        after,
        "--on-hang",
        "stop",
        "--grace",
        "3",
        "--",
        *TORCHRUN,
        *args,
    ]


def saved_verdict(logs: Path) -> dict[str, dict[str, Any]]:
    return hang_findings(json.loads((logs / "hang-1.json").read_text()))


def test_doctor_run_ends_a_hung_job_with_the_verdict(clean: Cluster, tmp_path: Path) -> None:
    out = subprocess.run(
        doctor_run(clean, tmp_path, "--mode", "sleep", "--rank", "3"),
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 124, out.stderr[-3000:]
    assert "doctor: hang: hang.outside_collective: rank 3 on node2 holds the job" in out.stderr
    assert "hung (--on-hang stop): ended the job on every node" in out.stderr
    assert "job failed" not in out.stderr  # the doctor ended it: nothing to explain
    found = saved_verdict(tmp_path)
    assert list(found) == ["hang.outside_collective"]
    assert found["hang.outside_collective"]["nodes"] == ["node2"]


def test_doctor_run_looks_before_the_jobs_own_timeout_and_reports_the_hang_as_a_finding(
    clean: Cluster, tmp_path: Path
) -> None:
    """The job's collective timeout (40 s, its --ddp_timeout) is under --hang-after (300 s): the
    look comes after 30 s of silence, before the job's watchdog would end the ranks, and the
    report's findings and summary carry the hang (a CI job reading them sees it fail)."""
    report = tmp_path / "report.json"
    argv = doctor_run(clean, tmp_path, "--mode", "sleep", "--rank", "3", "--ddp_timeout", "40")
    argv[argv.index("--hang-after") + 1] = "300"
    argv[argv.index("--") : argv.index("--")] = ["--json", str(report)]
    began = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 124, out.stderr[-3000:]
    assert time.monotonic() - began < 200
    assert "collective timeout is 40s (--ddp_timeout 40)" in out.stderr
    assert "doctor: hang: hang.outside_collective: rank 3 on node2 holds the job" in out.stderr
    doc = json.loads(report.read_text())
    found = hang_findings(doc)
    assert list(found) == ["hang.outside_collective"]
    assert found["hang.outside_collective"]["data"]["ranks"] == [3]
    assert 3 not in found["hang.outside_collective"]["data"]["reported_by"]["ranks"]
    assert doc["summary"]["fail"] >= 1


def test_doctor_run_keeps_watching_a_slow_job_that_progresses(
    clean: Cluster, tmp_path: Path
) -> None:
    argv = doctor_run(clean, tmp_path, "--mode", "slow", "--seconds", "30", "--step-seconds", "2")
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stderr.count("doctor: not hung: 6 rank(s) moved") >= 2
    assert not list(tmp_path.glob("hang-*"))


@pytest.fixture
def cut(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of its own for the tests that cut a node off."""
    with make_cluster(3, tmp_path / "cut") as c:
        yield c
        assert settle(c, MARKS, 60) == {}, "the job or the doctor left processes behind"


def _run_then(c: Cluster, logs: Path, fault: str) -> subprocess.CompletedProcess[str]:
    """doctor run of a job in a loop of allreduces; once its ranks are in the loop, ``fault``."""
    argv = doctor_run(c, logs, "--mode", "slow", "--seconds", "200", "--step-seconds", "0.3")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 180
        while b"steps done" not in b"".join(p.read_bytes() for p in logs.glob("node*.log")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        time.sleep(3)
        if fault == "blackhole":
            c.blackhole("node3")
        else:  # node3 drops what node1 and node2 send it; the controller still reaches it
            c.blackhole_between("node1", "node3")
            c.blackhole_between("node2", "node3")
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        if fault == "blackhole":
            c.unblackhole("node3")  # its keeper then sees the controller gone, and ends the job
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_a_node_cut_off_mid_training_is_named_silent(cut: Cluster, tmp_path: Path) -> None:
    out = _run_then(cut, tmp_path, "blackhole")
    assert out.returncode == 124, out.stderr[-3000:]
    found = saved_verdict(tmp_path)
    assert list(found) == ["hang.node_silent"]
    assert found["hang.node_silent"]["nodes"] == ["node3"]
    assert "4 wait: ranks 0-3 (node[1-2])" in found["hang.node_silent"]["summary"]


def test_every_rank_in_one_collective_is_the_network_named_by_its_links(
    cut: Cluster, tmp_path: Path
) -> None:
    out = _run_then(cut, tmp_path, "between")
    assert out.returncode == 124, out.stderr[-3000:]
    found = saved_verdict(tmp_path)
    assert list(found) == ["hang.symmetric"]
    assert found["hang.symmetric"]["nodes"] == ["node3"]
    assert (
        "node3 no longer connects to the other nodes over TCP" in found["hang.symmetric"]["summary"]
    )


def test_with_gloo_sizes_that_differ_fail_and_are_named_first(
    clean: Cluster, tmp_path: Path
) -> None:
    """Gloo aborts the rank that receives more than its buffer: a failure, not a hang (NCCL's
    hangs: tests/hang/test_gpu_captures.py), explained with the sizes before the peers lost."""
    out = subprocess.run(
        doctor_run(clean, tmp_path, "--mode", "size", "--rank", "3"),
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    causes = [ln.split()[2] for ln in out.stderr.splitlines() if ln.startswith("doctor: cause: ")]
    assert "gloo.size_mismatch" in causes, causes
    assert causes.index("gloo.size_mismatch") < causes.index("gloo.peer_lost"), causes


def test_with_gloo_a_killed_rank_fails_the_job_named_on_its_node(
    clean: Cluster, tmp_path: Path
) -> None:
    """Gloo's peers see the killed rank's connections close: the job fails, and the kill is
    named on the node it happened on."""
    out = subprocess.run(
        doctor_run(clean, tmp_path, "--mode", "kill", "--rank", "4"),
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    assert "doctor: cause: torch.elastic.worker_sigkill on node3:" in out.stderr
