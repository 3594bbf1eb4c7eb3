"""NCCL's log against the prediction, and the log diagnosis of a failed run.

No GPU here: the NCCL log is the shared FORMAT FIXTURE tests/fixtures/logs/format/
nccl-context-gpu.log (written from NCCL 2.32.3 format strings, see its header), not a capture.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checks.allreduce import Prediction, nccl_choices
from doctor.core.model import Finding
from doctor.facts.allreduce import Plan, Rank, RunResult
from doctor.facts.allreduce_rank import RankState
from doctor.nodes.inventory import Node
from doctor.stages.allreduce.stage import read_logs as scan


def nccl_findings(run: RunResult, seen: object, predicted: dict[str, Prediction]) -> list[Finding]:
    """The allreduce check's NCCL part, on a run whose logs were read."""
    return list(nccl_choices(replace(run, nccl_log=scan(run).nccl), predicted))


FIXTURE = Path(__file__).parent.parent / "fixtures/logs/format/nccl-context-gpu.log"


def nccl_run(nodes: int = 2) -> RunResult:
    """Four ranks, two per host, each holding its host's lines of the fixture as its stderr."""
    lines = FIXTURE.read_text().splitlines()
    ranks, states = [], []
    for i in range(4):
        host = "gpu-a" if i < 2 else "gpu-b"
        node = Node(f"n-{host}")
        ranks.append(Rank(i, node, i % 2))
        mine = [ln for ln in lines if ln.startswith(f"{host}:")] if i % 2 == 0 else []
        states.append(RankState(i, node.name, phase="done", host=host, stderr="\n".join(mine)))
    for extra in range(4, 4 + 2 * (nodes - 2)):  # two ranks per node that left no NCCL lines
        node = Node(f"n-extra{extra // 2}")
        ranks.append(Rank(extra, node, extra % 2))
        states.append(RankState(extra, node.name, phase="done", host=f"extra{extra // 2}"))
    plan = Plan(ranks=tuple(ranks), backend="nccl")
    return RunResult("as configured", plan, "passed", states, 1.0)


def test_nccl_lines_are_read_per_rank() -> None:
    seen = scan(nccl_run())
    doc = seen.nccl.to_json()
    assert doc["version"] == "2.32.3" and doc["nnodes"] == 2
    assert doc["transports"]["NET/Socket"] >= 1


def test_socket_where_ib_was_predicted_and_another_bootstrap_interface_are_findings() -> None:
    run = nccl_run()
    predicted = {
        "n-gpu-a": Prediction(bootstrap="ib0", network="IB"),
        "n-gpu-b": Prediction(bootstrap="eth0", network="IB"),
    }
    found = nccl_findings(run, scan(run), predicted)
    by_code = {(f.code, f.nodes) for f in found}
    assert by_code == {
        ("allreduce.nccl_iface_mismatch", ("n-gpu-a",)),
        ("allreduce.nccl_transport_mismatch", ("n-gpu-a",)),
    }
    transport = next(f for f in found if f.code == "allreduce.nccl_transport_mismatch")
    assert transport.summary.startswith("predicted NET/IB, got NET/Socket on n-gpu-a")


def test_matching_prediction_gives_no_finding_and_a_short_node_count_does() -> None:
    run = nccl_run()
    socket = {n: Prediction("eth0", "Socket") for n in ("n-gpu-a",)}
    assert nccl_findings(run, scan(run), socket) == []
    bigger = nccl_run(nodes=3)
    (finding,) = nccl_findings(bigger, scan(bigger), {})
    assert finding.code == "allreduce.nccl_nnodes"
    assert finding.summary.startswith("NCCL counted 2 node(s) for 3")


def test_a_failed_rank_error_goes_through_the_log_diagnosis() -> None:
    # The error text a real Gloo rank reported on the namespace cluster (see test_cluster.py).
    error = (
        "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/"
        "transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
        "remote=[127.0.1.1]:28589"
    )
    rank = RankState(0, "node1", phase="init", error=error, failed_phase="init", host="node1")
    plan = Plan(ranks=(Rank(0, Node("node1")),))
    seen = scan(RunResult("as configured", plan, "failed", [rank], 1.0))
    assert "gloo.loopback_address" in seen.hits
