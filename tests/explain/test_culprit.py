"""The cause before its consequences, and the culprit in the JSON: a finding's ``nodes`` and
``data.ranks`` name who failed, never a rank or node that only reported it (``data.reported_by``);
an address is tied to its host and rank by the log's own lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from doctor.explain.culprit import bus_id
from doctor.explain.scan import explain
from doctor.render.explain import explain_json, render_explain_text
from tests.explain.fixtures import LOGS, body


def doc_of(tmp_path: Path, text: bytes, name: str = "job.log") -> dict[str, Any]:
    path = tmp_path / name
    path.write_bytes(text)
    return explain_json(explain([str(path)]))


def fixture(tmp_path: Path, name: str) -> dict[str, Any]:
    return doc_of(tmp_path, body(LOGS / name), Path(name).name)


def by_code(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in doc["findings"]}


def test_an_ib_error_from_a_peer_names_the_peer_not_the_rank_that_saw_it(tmp_path: Path) -> None:
    """NCCL's IB completion error on gpu-a names its peer by address; gpu-b's own Bootstrap and
    comm lines say 10.42.0.2 is gpu-b, rank 1. The watchdog's abort, printed first, follows."""
    doc = fixture(tmp_path, "format/nccl-ib-peer-gone.log")
    first = doc["context"]["first_error"]
    assert first["code"] == "nccl.ib.completion_retry_exceeded"
    assert (first["host"], first["rank"]) == ("gpu-b", 1)
    found = doc["findings"][0]
    assert found["code"] == first["code"] and found["nodes"] == ["gpu-b"]
    assert found["data"]["ranks"] == [1]
    # gpu-a printed it: rank 0 by its NCCL prefix's pid and comm line, never the culprit
    assert found["data"]["reported_by"] == {"nodes": ["gpu-a"], "ranks": [0]}
    [suspect] = found["data"]["suspects"]
    assert suspect["address"] == "10.42.0.2" and "Bootstrap" in suspect["by"]
    assert "10.42.0.2 is gpu-b (rank 1" in found["summary"]
    assert found["data"]["then"] == ["torch.nccl.comm_aborted", "nccl.result.remote_error"]
    aborted = by_code(doc)["torch.nccl.comm_aborted"]
    assert aborted["nodes"] == [] and "ranks" not in aborted["data"]
    assert aborted["data"]["role"] == "consequence"


def test_the_terminal_names_the_same_first_failure_and_lists_what_followed(tmp_path: Path) -> None:
    path = tmp_path / "nccl-ib-peer-gone.log"
    path.write_bytes(body(LOGS / "format/nccl-ib-peer-gone.log"))
    out = io.StringIO()
    render_explain_text(explain([str(path)]), Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    assert "(first: nccl.ib.completion_retry_exceeded at " in text
    assert "then: torch.nccl.comm_aborted, reported by rank 0:" in text
    # a consequence under the cause is one line, not an entry of its own
    assert "torch.nccl.comm_aborted  (seen" not in text


def test_a_refused_peer_is_the_host_that_holds_its_address(tmp_path: Path) -> None:
    """Two processes on gpu-node-17 bootstrapped from 10.148.3.247: the node is named, no rank."""
    doc = fixture(tmp_path, "format/nccl-connect-refused-peer.log")
    found = doc["findings"][0]
    assert found["code"] == "nccl.socket.connect_failed" == doc["context"]["first_error"]["code"]
    assert found["nodes"] == ["gpu-node-17"] and "ranks" not in found["data"]
    assert found["data"]["reported_by"] == {"nodes": ["gpu-node-16"], "ranks": [0, 1]}
    assert doc["context"]["first_error"]["rank"] is None


def test_an_xid_names_the_rank_whose_gpu_it_is(tmp_path: Path) -> None:
    """The kernel names the GPU by its PCI address; NCCL's comm line says rank 1 uses busId
    3b000 on gpu-node-07. CUDA's word on it in rank 1 (a GPU fault) restates it."""
    doc = fixture(tmp_path, "format/xid-rank-gpu.log")
    first = doc["context"]["first_error"]
    assert first["code"] == "gpu.xid.fell_off_bus"
    assert (first["nodes"], first["ranks"]) == (["gpu-node-07"], [1])
    assert doc["findings"][0]["data"]["then"] == ["cuda.gpu_fault"]


def test_sruns_report_names_the_task_and_node(tmp_path: Path) -> None:
    """srun's words as the bed's capture printed them (hang/exits/srun-segv.log), for a task and
    node of a larger job; the ranks that lost it only reported."""
    text = (
        b"[rank12]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        b"pair.cc:553] Connection closed by peer [10.100.4.9]:53218. This is typically caused "
        b"by a remote worker crashing.\n"
        b"srun: error: nid007306: task 640: Segmentation fault (core dumped)\n"
        b"srun: error: nid007301: tasks 0-3: Exited with exit code 1\n"
    )
    doc = doc_of(tmp_path, text)
    first = doc["context"]["first_error"]
    assert first["code"] == "slurm.task_killed"
    assert (first["host"], first["rank"]) == ("nid007306", 640)
    lost = by_code(doc)["gloo.peer_lost"]
    assert lost["nodes"] == [] and lost["data"]["reported_by"]["ranks"] == [12]
    # the peer's address no line ties to a host: a suspect, not a node
    assert lost["data"]["suspects"] == [
        {"said": "10.100.4.9", "address": "10.100.4.9", "node": None}
    ]


def test_a_consequence_names_the_peer_most_of_its_lines_lost(tmp_path: Path) -> None:
    """The bed's srun job: ranks 1, 2 and 4 lost 198.18.10.2 (rank 3's node); ranks 0 and 5 then
    lost peers the teardown ended, once each."""
    doc = fixture(tmp_path, "hang/exits/srun-kill.log")
    lost = by_code(doc)["gloo.peer_lost"]
    assert [s["address"] for s in lost["data"]["suspects"]] == ["198.18.10.2"]
    assert lost["data"]["reported_by"]["ranks"] == [0, 1, 2, 4, 5]


@pytest.mark.parametrize(
    ("name", "code", "nodes", "ranks"),
    [
        ("hang/exits/srun-kill.log", "slurm.task_killed", ["node2"], [3]),
        ("hang/exits/mpirun-3-nodes.log", "mpi.rank_killed", ["node2"], [3]),
        # the kernel's OOM kill of pid 13159, torchrun's root cause for rank 1
        ("real/torchrun-worker-oom-killed.log", "host.oom_killed", [], [1]),
        # srun's "gpu-node-12: task 3: Out Of Memory" after slurmstepd's own report
        ("format/slurm-oom.log", "host.oom_killed", ["gpu-node-12"], [3]),
    ],
)
def test_the_first_failure_names_its_culprit(
    tmp_path: Path, name: str, code: str, nodes: list[str], ranks: list[int]
) -> None:
    first = fixture(tmp_path, name)["context"]["first_error"]
    assert (first["code"], first["nodes"], first["ranks"]) == (code, nodes, ranks)


@pytest.mark.parametrize(
    ("name", "code", "nodes", "reporters"),
    [
        # the store's node, which five ranks dialled in vain; they only reported it
        ("bed/store-refused.log", "torch.store.connect_timeout", ["node1"], [1, 2, 3, 4, 5]),
        # srun's "Node failure on node2", not the "STEP ... ON node1" that reported it
        ("bed/node-fail.log", "slurm.node_fail", ["node2"], []),
        # a time limit names no node: "ON node1" is the step's first node
        ("bed/time-limit.log", "slurm.time_limit", [], [0]),
    ],
)
def test_the_beds_scheduler_failures_name_the_culprit_only(
    tmp_path: Path, name: str, code: str, nodes: list[str], reporters: list[int]
) -> None:
    doc = fixture(tmp_path, name)
    first = doc["context"]["first_error"]
    assert (first["code"], first["nodes"], first["ranks"]) == (code, nodes, [])
    assert (first["reported_by"] or {"ranks": []})["ranks"] == reporters
    named = {n for f in doc["findings"] if f["severity"] in ("fail", "warn") for n in f["nodes"]}
    assert named == set(nodes)


def test_a_hung_rank_ended_by_its_timeout_names_no_waiting_rank(tmp_path: Path) -> None:
    """The bed's hang: five ranks' Gloo timeouts, rank 3 silent. The timeouts are the first
    failure (nothing of a cause's class is there) and name none of the ranks that waited."""
    doc = fixture(tmp_path, "bed/hung-timeout.log")
    first = doc["context"]["first_error"]
    assert first["code"] == "gloo.op_timeout" and first["nodes"] == first["ranks"] == []
    assert first["reported_by"]["ranks"] == [0, 1, 2, 4, 5]
    assert not [f for f in doc["findings"] if f["data"].get("ranks") or f["nodes"]]


def test_a_launchers_teardown_after_a_lost_node_names_no_one(tmp_path: Path) -> None:
    """srun's 'tasks 0-1: Killed' on each node left after gpu-n03 failed: the teardown, which
    follows from the node failure; the ranks it killed only waited."""
    doc = fixture(tmp_path, "tail/slurm-node-fail.log")
    first = doc["context"]["first_error"]
    assert (first["code"], first["nodes"]) == ("slurm.node_fail", ["gpu-n03"])
    killed = by_code(doc)["slurm.task_killed"]
    assert killed["nodes"] == [] and "ranks" not in killed["data"]
    assert killed["data"]["reported_by"] == {"nodes": ["gpu-n01", "gpu-n02"], "ranks": [0, 1, 2, 3]}
    assert killed["data"]["role"] == "restatement" and "slurm.task_killed" in first_then(doc)
    # the peers' lost connection names the node by the name srun gives it
    assert by_code(doc)["nccl.socket.peer_closed"]["nodes"] == ["gpu-n03"]


def first_then(doc: dict[str, Any]) -> list[str]:
    return list(doc["findings"][0]["data"].get("then", []))


def test_a_loopback_peer_names_no_one(tmp_path: Path) -> None:
    text = (
        b"[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        b"pair.cc:553] Connection closed by peer [127.0.0.1]:16608. This is typically caused "
        b"by a remote worker crashing.\n"
    )
    lost = doc_of(tmp_path, text)["findings"][0]
    assert lost["nodes"] == [] and "ranks" not in lost["data"] and "suspects" not in lost["data"]


def test_only_consequences_stand_first_where_nothing_else_is(tmp_path: Path) -> None:
    """A watchdog timeout alone is the first failure, and names no one."""
    doc = fixture(tmp_path, "format/torch-nccl-watchdog.log")
    first = doc["context"]["first_error"]
    assert first["code"] == "torch.nccl.watchdog_timeout"
    assert first["nodes"] == [] and first["ranks"] == [] and first["reported_by"]["ranks"] == [1]


def test_a_hang_verdict_that_names_the_rank_leads_over_the_watchdogs(tmp_path: Path) -> None:
    doc = fixture(tmp_path, "hang/watchdog/v2.6-today-journald.log")
    first = doc["context"]["first_error"]
    assert first["code"] == "hang.outside_collective"
    assert (first["host"], first["rank"]) == ("gpu-c02", 2)
    assert "torch.nccl.watchdog_timeout" in doc["findings"][0]["data"]["then"]
    assert json.dumps(doc["findings"][0]["nodes"]) == '["gpu-c02"]'


@pytest.mark.parametrize(
    ("pci", "bus"),
    [("0000:3b:00", 0x3B000), ("0000:3b:00.0", 0x3B000), ("3b000", 0x3B000), ("zz", None)],
)
def test_a_pci_address_reads_as_nccls_bus_id(pci: str, bus: int | None) -> None:
    assert bus_id(pci) == bus
