"""What NCCL's log says it used, judged through `doctor analyze` (paste -> facts -> checks), on the
written fixtures of tests/fixtures/logs/nccl and tests/fixtures/paste."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.explain.fixtures import LOGS, body

PASTE = Path(__file__).resolve().parents[1] / "fixtures" / "paste"


def log(name: str) -> str:
    return body(LOGS / "nccl" / name).decode()


def analyze(tmp_path: Path, **pastes: str) -> dict[str, Any]:
    """pastes: file name (node=) -> text; several files for one node as 'node=name' keys."""
    args = []
    for key, text in pastes.items():
        node, _, name = key.partition("__")
        path = tmp_path / f"{node}-{name or 'log'}.txt"
        path.write_text(text)
        args.append(f"{node}={path}")
    proc = subprocess.run(
        [sys.executable, "-m", "doctor", "analyze", *args, "-f", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def codes(report: dict[str, Any], prefix: str = "nccl.log") -> list[str]:
    return sorted(f["code"] for f in report["findings"] if f["code"].startswith(prefix))


def test_sockets_where_rdma_ports_are_up_name_the_node_and_the_reason(tmp_path: Path) -> None:
    ibv = body(PASTE / "written-ibv_devinfo-v.txt").decode()
    report = analyze(tmp_path, h100a=log("v2.27-socket-fallback.log"), h100a__ibv=ibv)
    (found,) = [f for f in report["findings"] if f["code"] == "nccl.log.socket_fallback"]
    assert found["nodes"] == ["h100a"]
    assert "NCCL_IB_DISABLE=1 is set" in found["summary"]
    assert found["fix"]["commands"] == ["unset NCCL_IB_DISABLE NCCL_NET"]
    (row,) = report["nccl"]
    assert row["used"] == "NCCL 2.27.3 used NET/Socket bond0, bootstrap bond0"


def test_two_nodes_on_different_versions_and_plugins_drift(tmp_path: Path) -> None:
    text = log("v2.21-v2.18-drift.log").splitlines()
    a = "\n".join(line for line in text if line.startswith("gpu-a"))
    b = "\n".join(line for line in text if line.startswith("gpu-b"))
    report = analyze(tmp_path, gpua=a, gpub=b)
    drift = [f for f in report["findings"] if f["code"] == "nccl.log.drift"]
    said = " | ".join(f["summary"] for f in drift)
    for what in ("NCCL version", "network", "net plugin"):
        assert f"{what} differs" in said
    assert all(f["severity"] == "fail" for f in drift)
    assert all("(2 of 2 ranks showed it)" in f["summary"] for f in drift)
    assert {n for f in drift for n in f["nodes"]} <= {"gpua", "gpub"}
    # gpu-b printed no NCCL_IB_TIMEOUT line: not shown there, so not compared (an info line).
    (partly,) = [f for f in report["findings"] if f["code"] == "nccl.log.not_shown"]
    assert partly["severity"] == "info" and "NCCL_IB_TIMEOUT=22 (1 of 2)" in partly["summary"]


@pytest.mark.parametrize(
    "name",
    ["v2.12-ib-gdr-srun.log", "v2.18-roce-k8s-hpcx.log", "v2.21-efa-ofi.log", "rccl-roce.log",
     "v2.7-socket-torchrun.log"],
)  # fmt: skip
def test_healthy_logs_raise_nothing(tmp_path: Path, name: str) -> None:
    report = analyze(tmp_path, node1=log(name))
    assert codes(report) == []
    assert report["nccl"] and all(r["used"] for r in report["nccl"])


def test_gdr_off_with_its_reason(tmp_path: Path) -> None:
    report = analyze(tmp_path, gpu=log("v2.4-ib-mpirun.log"))
    gdr = [f for f in report["findings"] if f["code"] == "nccl.log.gdr_off"]
    assert gdr and all("no module or not supported by GPU" in f["summary"] for f in gdr)
    assert sorted(n for f in gdr for n in f["nodes"]) == ["gpu01", "gpu02"]


def test_diagnostics_warnings_become_findings(tmp_path: Path) -> None:
    report = analyze(tmp_path, b200=log("v2.31-diagnostics.log"))
    (diag,) = [f for f in report["findings"] if f["code"] == "nccl.log.diagnostics"]
    assert diag["severity"] == "warn" and "net bw: 181.2/362.4/363.0" in diag["summary"]


# Written from NCCL 2.21.5's format strings (transport/net.cc "Channel %02d/%d : %d[%d] -> %d[%d]
# [send] via NET/%s/%d%s%s", init.cc "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank
# %d MNNVL %d", "%s set by environment to %s"): two ranks of one node, P2P and SHM switched off.
INTRA = """\
n1:10:10 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
n1:10:10 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1
n1:10:10 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
n1:10:30 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
n1:11:31 [1] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0
n1:10:30 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
n1:11:31 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0
"""


def test_ranks_of_one_node_over_the_network(tmp_path: Path) -> None:
    report = analyze(tmp_path, n1=INTRA)
    (found,) = [f for f in report["findings"] if f["code"] == "nccl.log.intra_node_network"]
    assert "NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1" in found["summary"]
    assert found["nodes"] == ["n1"]


def test_bootstrap_elsewhere_than_predicted_says_which_is_right(tmp_path: Path) -> None:
    ip_a = body(PASTE / "netns-ip-a.txt").decode()  # eth0 10.77.0.5 and a bridge, a macvlan
    log_text = "n1:5:5 [0] NCCL INFO Bootstrap : Using veth9:10.9.9.9<0>\n"
    report = analyze(tmp_path, n1=log_text, n1__ip=ip_a)
    (found,) = [f for f in report["findings"] if f["code"] == "nccl.log.bootstrap"]
    assert "bootstrapped on veth9" in found["summary"] and "eth0 is right" in found["summary"]
    assert found["fix"]["commands"] == ["export NCCL_SOCKET_IFNAME==eth0"]
    (row,) = report["nccl"]
    assert row["predicted"] == "NET/Socket, bootstrap eth0"


# Two ranks' output of a live NCCL allreduce, written from NCCL 2.27.3's format strings (param.cc
# "%s set by environment to %s", init.cc "Using network %s", "comm %p rank %d nRanks %d nNodes %d
# localRanks %d localRank %d MNNVL %d", transport/net.cc "... [send] via NET/%s/%d%s%s%s").
LIVE = {
    0: "a1:7:7 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1\n"
    "a1:7:9 [0] NCCL INFO Using network Socket\n"
    "a1:7:9 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n"
    "a1:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
    1: "a2:8:8 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n"
    "a2:8:9 [0] NCCL INFO Using network Socket\n"
    "a2:8:9 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n",
}


def test_the_live_allreduce_logs_are_judged_too() -> None:
    from checks.nccl_log import nccl_log
    from doctor.core.model import Severity
    from doctor.facts.allreduce import AllreduceFacts, Plan, Rank, RankState, RunResult
    from doctor.facts.network.rdma import Hca, Port, RdmaFacts
    from doctor.nodes.inventory import Node
    from doctor.stages.allreduce.stage import with_logs
    from tests.factkit import cluster, node

    port = Port(1, 4, "ACTIVE", "LinkUp", 200.0, "InfiniBand", ())
    rdma = RdmaFacts((Hca("mlx5_0", None, None, None, (), (port,)),), ("uverbs0",), True, None)
    plan = Plan(ranks=(Rank(0, Node("n1")), Rank(1, Node("n2"))), port=1, backend="nccl")
    ranks = [RankState(r, f"n{r + 1}", host=f"a{r + 1}", stderr=LIVE[r]) for r in (0, 1)]
    run = with_logs(RunResult("as configured", plan, "passed", ranks, 1.0), "nccl")
    facts = AllreduceFacts("nccl", 2, "n1", 1, "python3", "n1:1", runs=(run,))
    both = cluster(node("n1", rdma=rdma), node("n2", rdma=rdma))
    both = dataclasses.replace(both, allreduce=facts)
    found = {(f.code, f.nodes) for f in nccl_log.fn(both)}
    assert ("nccl.log.socket_fallback", ("n1",)) in found  # NCCL_IB_DISABLE=1, named
    assert ("nccl.log.socket_fallback", ("n2",)) in found  # the reason is unknown there
    # The version is shown on n2 only, NCCL_IB_DISABLE on n1 only: nothing disagrees.
    assert not [f for f in nccl_log.fn(both) if f.code == "nccl.log.drift"]
    (partly,) = [f for f in nccl_log.fn(both) if f.code == "nccl.log.not_shown"]
    assert "NCCL_IB_DISABLE=1 (1 of 2)" in partly.summary and partly.severity is Severity.INFO
