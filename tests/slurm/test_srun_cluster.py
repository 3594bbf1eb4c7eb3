"""doctor preflight through a real srun, inside a real allocation, on namespace nodes."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from doctor.core.capture import Capture
from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import ExecResult
from doctor.nodes.transport.srun import CANCEL_GRACE, LAUNCH_GRACE, slurm_nodes
from doctor.nodes.transport.srun_launch import SrunLauncher
from doctor.pipeline.request import SINCE_ENV
from doctor.stages.collect import TRANSPORT_GRACE, gather
from tests.cluster.slurm import Slurm
from tests.slurm.conftest import DOCTOR

pytestmark = pytest.mark.cluster

# An allocation of the three test nodes, given at once or not at all.
SALLOC = ["salloc", "-N3", "-w", "node[1-3]", "--immediate=20"]


def preflight_in_allocation(slurm: Slurm, *args: str, timeout: float = 180) -> tuple[dict, str]:
    proc = slurm.client(
        [
            *SALLOC,
            *DOCTOR,
            "preflight",
            "-f",
            "json",
            *args,
        ],
        timeout=timeout,
    )
    assert proc.stdout.strip().startswith("{"), proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_srun_collects_three_different_nodes_and_runs_the_allreduce(slurm: Slurm) -> None:
    report, err = preflight_in_allocation(
        slurm, "--launcher", "srun", "--python", sys.executable, "--backend", "gloo"
    )
    nodes = report["nodes"]
    assert sorted(nodes) == ["node1", "node2", "node3"], err
    assert all(n["status"] == "ok" for n in nodes.values()), nodes
    hostnames = {n["facts"]["system"]["hostname"] for n in nodes.values()}
    assert hostnames == {"node1", "node2", "node3"}
    addresses = {n.address for n in slurm.nodes}
    assert len(addresses) == 3
    # Each capture came from a task of one srun step of this allocation, one task per node.
    envs = [node["facts"]["env"] for node in nodes.values()]
    assert len({e["SLURM_JOB_ID"] for e in envs}) == 1
    assert sorted(e["SLURM_NODEID"] for e in envs) == ["0", "1", "2"]
    # The planted problem shows on node3 only, and fails the run.
    shm = [f for f in report["findings"] if f["code"] == "shm.too_small"]
    assert [f["nodes"] for f in shm] == [["node3"]]
    # The Gloo allreduce ran one rank per node through srun and got the exact sum.
    allreduce = report["allreduce"]
    assert (allreduce["backend"], allreduce["world_size"]) == ("gloo", 3), allreduce
    assert allreduce["status"] == "passed" and allreduce["verified"], allreduce
    hosts = {r["host"] for r in allreduce["runs"][0]["ranks"]}
    assert hosts == {"node1", "node2", "node3"}, allreduce["runs"][0]["ranks"]
    assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()


def test_reachability_runs_as_one_srun_step_and_the_mesh_is_not_applicable(slurm: Slurm) -> None:
    report, err = preflight_in_allocation(slurm, "--no-allreduce")
    reach = report["reachability"]
    assert reach["protocol"].startswith("one srun step"), err
    assert sorted(reach["matrix"]) == ["node1", "node2", "node3"]
    statuses = {s for row in reach["matrix"].values() for s in row.values()}
    assert statuses == {"ok"}, reach["links"]
    assert reach["coverage"]["pairs_tested"] == 6
    [mesh] = [o for o in report["outcomes"] if o["check"] == "ssh.mesh"]
    assert mesh["status"] == "skip" and "not applicable under srun" in mesh["reason"]
    assert "ssh_mesh" not in report
    assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()


def test_auto_uses_srun_inside_an_allocation(slurm: Slurm) -> None:
    report, err = preflight_in_allocation(slurm, "--no-allreduce")
    assert sorted(report["nodes"]) == ["node1", "node2", "node3"], err


# Run by salloc: time the transport alone (no CLI start-up), then run the CLI, in one allocation
# (a second one would wait: the first job stays completing on the node whose slurmd is dead).
TIMED = """
import json, os, subprocess, sys, time
from doctor.stages.collect import gather
from doctor.nodes.transport.srun import slurm_nodes
nodes, transport = slurm_nodes(None, None, os.environ)
started = time.monotonic()
results = gather(nodes, transport, {"deadline": 5.0})
elapsed = time.monotonic() - started
cli = [sys.executable, "-m", "doctor", "preflight", "-f", "json", "--deadline=5", "--no-allreduce"]
report = json.loads(subprocess.run(cli, capture_output=True, text=True).stdout)
codes = {n: getattr(r, "code", "ok") for n, r in results.items()}
print(json.dumps({"elapsed": elapsed, "codes": codes, "report": report}))
"""


def test_stopped_slurmd_is_reported_within_the_deadline(slurm: Slurm) -> None:
    node3 = next(n for n in slurm.nodes if n.name == "node3")
    slurm.stop_slurmd("node3")
    try:
        proc = slurm.client(
            [
                *SALLOC,
                sys.executable,
                "-c",
                TIMED,
            ],
            timeout=180,
        )
    finally:
        slurm.start_slurmd(node3)
        slurm.wait_idle(["node3"], timeout=60)
    got = json.loads(proc.stdout)
    assert got["codes"] == {"node1": "ok", "node2": "ok", "node3": "node.launch_failed"}, (
        proc.stderr
    )
    # Within the doctor's own deadline (5 s probe + grace + srun's launch), not SLURM's 30 s
    # SlurmdTimeout after which the controller would mark the node down.
    assert got["elapsed"] < 5 + TRANSPORT_GRACE + LAUNCH_GRACE, got["elapsed"]
    nodes = got["report"]["nodes"]
    assert nodes["node1"]["status"] == nodes["node2"]["status"] == "ok"
    failure = nodes["node3"]["failure"]
    assert failure["code"] == "node.launch_failed", failure
    assert "node3" in failure["summary"]
    assert "failed on node node3" in failure["detail"]  # what srun said about it
    codes = {f["code"] for f in got["report"]["findings"] if f["nodes"] == ["node3"]}
    assert failure["code"] in codes


def wait_until(done, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.2)
    return bool(done())


def test_timeout_cancels_the_job_and_leaves_nothing(slurm: Slurm) -> None:
    # Outside an allocation srun makes its own job; past the deadline that job is scancelled.
    nodes, transport = slurm_nodes("node[1-2]", None, slurm.env)
    transport.launch_grace = 1
    started = time.monotonic()
    got = transport.execute_all(nodes, ["sleep", "300"], b"", timeout=2)
    elapsed = time.monotonic() - started
    assert {n: r.code for n, r in got.items()} == {"node1": "node.timeout", "node2": "node.timeout"}
    assert elapsed < 2 + 1 + CANCEL_GRACE + 5, elapsed
    assert wait_until(lambda: not slurm.client(["squeue", "-h"]).stdout.strip())
    assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()


# On node3 the command kills its own slurmstepd (the task's parent) and exits. srun then either
# waits for node3 until the deadline or, when the dying stepd's connection is reset, aborts the
# whole step with the other nodes' tasks (see test_srun_frames for that recorded case).
KILLS_STEPD_ON_NODE3 = """
if [ "$SLURMD_NODENAME" = node3 ]; then
  read -r _ _ _ stepd _ < /proc/$PPID/stat
  kill -9 "$stepd"
  exit 0
fi
sleep 2
echo answered
"""


def test_a_node_lost_mid_run_is_named_and_the_others_still_answer(slurm: Slurm) -> None:
    nodes, transport = slurm_nodes("node[1-3]", None, slurm.env)
    node3 = next(n for n in slurm.nodes if n.name == "node3")
    try:
        got = transport.execute_all(nodes, ["sh", "-c", KILLS_STEPD_ON_NODE3], b"", timeout=8)
    finally:
        # The job stays completing on node3 without its stepd: a fresh slurmd puts it back.
        slurm.stop_slurmd("node3")
        slurm.start_slurmd(node3)
        slurm.wait_idle(["node3"], timeout=60)
    answered = {n: r.stdout for n, r in got.items() if isinstance(r, ExecResult)}
    assert answered == {"node1": b"answered\n", "node2": b"answered\n"}, got
    lost = got["node3"]
    assert isinstance(lost, NodeFailure), lost
    assert lost.code in {"node.timeout", "node.probe_failed"} and "node3" in lost.summary, lost
    assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()


CTRL_C = """
import os, signal, subprocess, sys, threading
from doctor.nodes.transport.srun import slurm_nodes
nodes, transport = slurm_nodes(None, None, os.environ)
threading.Timer(3, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    transport.execute_all(nodes, ["sleep", "300"], b"", timeout=120)
except KeyboardInterrupt:
    steps = subprocess.run(["squeue", "-h", "-s", "-j", os.environ["SLURM_JOB_ID"], "-o", "%i %j"],
                           capture_output=True, text=True).stdout
    print("interrupted; steps:", steps.strip().replace("\\n", ";"), flush=True)
    sys.stdin.readline()  # hold the allocation while the test looks for leftovers
"""


def test_ctrl_c_cancels_the_step_inside_an_allocation(slurm: Slurm) -> None:
    proc = subprocess.Popen(
        [*SALLOC, sys.executable, "-c", CTRL_C],
        env=slurm.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("interrupted; steps:"), proc.stderr.read()  # type: ignore[union-attr]
        # No step of the doctor's is left in the allocation, and no task on any node.
        assert "cluster-doctor" not in line, line
        assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()
    finally:
        proc.communicate("\n", timeout=30)


def test_prolog_mode_on_a_node_with_a_64mb_shm(slurm: Slurm) -> None:
    # The kernel log from the test's start only (srun's tasks do not get the test's environment):
    # this machine's log holds the lines other tests planted, and keeps them until it reboots.
    prolog = [*DOCTOR, "preflight", "--local", "--prolog", "--since", os.environ[SINCE_ENV]]
    bad = slurm.client(["srun", "-w", "node3", *prolog])
    assert bad.returncode == 1, bad.stderr
    reason = [ln for ln in bad.stderr.splitlines() if ln.startswith("cluster-doctor:")]
    assert len(reason) == 1 and reason[0].startswith("cluster-doctor: node3: shm.too_small: "), (
        reason
    )
    assert "64" in reason[0]
    good = slurm.client(["srun", "-w", "node1", *prolog])
    assert (good.returncode, good.stdout, good.stderr) == (0, "", "")


def local_addresses(fib_trie: str) -> set[str]:
    """The addresses /proc/net/fib_trie marks ``/32 host LOCAL``: the namespace's own."""
    lines = fib_trie.splitlines()
    return {
        prev.split("-- ")[-1].strip()
        for prev, line in itertools.pairwise(lines)
        if line.strip() == "/32 host LOCAL"
    }


def test_each_capture_comes_from_its_own_node_address(slurm: Slurm) -> None:
    # Outside an allocation: srun makes its own (--immediate); /proc/net/fib_trie lists the local
    # addresses of the network namespace the probe ran in.
    nodes, transport = slurm_nodes("node[1-3]", None, slurm.env)
    spec = {"deadline": 10.0}
    spec["files"] = ["/proc/net/fib_trie"]
    results = gather(nodes, transport, spec)
    for node in slurm.nodes:
        capture = results[node.name]
        assert isinstance(capture, Capture), capture
        assert capture.asked is not None and capture.asked[0] <= capture.value("time")
        assert capture.value("time") <= capture.asked[1]
        fib = capture.file("/proc/net/fib_trie")
        assert isinstance(fib, str)
        assert node.address in local_addresses(fib) - {"127.0.0.1"}, fib
        assert len(local_addresses(fib) & {n.address for n in slurm.nodes}) == 1


def test_partition_probes_its_usable_nodes_and_names_the_drained_one(slurm: Slurm) -> None:
    update = ["scontrol", "update", "nodename=node2"]
    slurm.client([*update, "state=drain", "reason=doctor-test"], check=True)
    try:
        proc = slurm.client(
            [*DOCTOR, "preflight", "-f", "json", "--partition", "test", "--no-allreduce"],
            timeout=120,
        )
    finally:
        slurm.client([*update, "state=resume"], check=True)
    nodes = json.loads(proc.stdout)["nodes"]
    assert nodes["node1"]["status"] == nodes["node3"]["status"] == "ok", proc.stderr
    failure = nodes["node2"]["failure"]
    assert failure["code"] == "node.launch_failed"
    assert failure["summary"] == "SLURM reports node2 drain: not probed now"


def test_auto_uses_srun_in_an_sbatch_script(slurm: Slurm, tmp_path) -> None:
    # The batch script runs on the allocation's first node; the doctor reaches all three from it.
    out = tmp_path / "report.json"
    script = f"{shlex.join(DOCTOR)} preflight -f json --no-allreduce > {out}"
    submit = slurm.client(["sbatch", "-N3", "-w", "node[1-3]", "-o", "/dev/null", "--wrap", script])
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.split()[-1]
    assert wait_until(lambda: not slurm.client(["squeue", "-h", "-j", job]).stdout.strip(), 60)
    report = json.loads(out.read_text())
    assert {n: v["status"] for n, v in report["nodes"].items()} == dict.fromkeys(
        ["node1", "node2", "node3"], "ok"
    )


def test_killing_an_allreduce_rank_scancels_its_step(
    slurm: Slurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in slurm.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    node1 = Node(name="node1", address="node1")
    rank = SrunLauncher().start(node1, ["sh", "-c", "echo started; exec sleep 300"], b"")
    assert not isinstance(rank, str), rank
    assert next(iter(rank.stdout_lines())) == b"started\n"
    rank.kill()
    assert wait_until(lambda: not slurm.client(["squeue", "-h"]).stdout.strip())
    assert wait_until(lambda: not slurm.leftovers()), slurm.leftovers()
