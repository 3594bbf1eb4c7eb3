"""Pastes from two nodes run the real checks: version drift is found as across probed nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.core.model import Finding
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import parse_node
from doctor.judge.registry import load_checks
from doctor.judge.report import Report
from doctor.judge.runner import run_checks
from doctor.paste import read_inputs
from tests.paste.pastekit import captured_stdout, pasted


@pytest.fixture
def two_nodes(tmp_path: Path) -> list[str]:
    """gpu1: Open MPI 4.1.4, NCCL 2.21.5; gpu2: MPICH 4.0.2, NCCL 2.18.6, each with its `ip a`."""
    log = pasted("written-nccl-init.log")
    gpu1 = "$ ip a\n" + pasted("netns-ip-a.txt") + "$ mpirun --version\n"
    gpu1 += pasted("openmpi-mpirun-version.txt") + log.replace("gpu2:", "gpu1:")
    gpu2 = "$ mpiexec --version\n" + captured_stdout("cpu-mpich", "mpi:mpirun")
    gpu2 += pasted("netns-ip-d-addr.txt") + log.replace("2.21.5+cuda12.4", "2.18.6+cuda12.2")
    (tmp_path / "gpu1.txt").write_text(gpu1)
    (tmp_path / "gpu2.txt").write_text(gpu2)
    return [str(tmp_path / "gpu1.txt"), str(tmp_path / "gpu2.txt")]


def findings(outcomes: list) -> dict[str, Finding]:
    return {f.code: f for o in outcomes for f in o.findings}


def test_mpi_and_nccl_drift_through_the_real_checks(two_nodes: list[str]) -> None:
    caps = read_inputs(two_nodes)
    cluster = ClusterFacts(nodes={n: parse_node(n, c) for n, c in caps.items()})
    outcomes = run_checks(load_checks(), cluster)
    found = findings(outcomes)
    assert set(found) >= {"drift.mpi", "drift.nccl"}
    assert "MPICH 4.0.2" in found["drift.mpi"].summary + found["drift.mpi"].data["expected"]
    assert {"2.21.5", "2.18.6"} == {
        found["drift.nccl"].data["value"],
        found["drift.nccl"].data["expected"],
    }
    # Nothing a paste cannot show is judged: no finding about /dev/shm, RDMA, GPUs or Gloo's
    # hostname (never captured), only the drift and what the interfaces show.
    assert not {c for c in found if c.startswith(("shm.", "rdma.", "gpu.", "gloo.", "tp."))}
    report = Report.build("analyze", cluster, outcomes).to_json()
    facts = report["nodes"]["gpu2"]["facts"]
    assert facts["mpi"]["implementation"] == "MPICH"
    assert facts["nccl"]["libraries"][0]["version"] == "2.18.6"
    assert facts["net"]["interfaces"]["br0"]["kind"] == "bridge"
    # gpu2's `ip -d a` says what eth0 is; gpu1's `ip a` only shows eth0@if2: a guess, said so.
    assert facts["net"]["interfaces"]["eth0"]["kind_from"] == "text"
    eth0 = report["nodes"]["gpu1"]["facts"]["net"]["interfaces"]["eth0"]
    assert (eth0["kind"], eth0["kind_from"]) == ("veth", "name")


def test_doctor_analyze_on_pasted_files(
    two_nodes: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["analyze", *two_nodes, "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1  # drift.mpi is a failure
    assert list(report["nodes"]) == ["gpu1", "gpu2"]
    codes = {f["code"] for f in report["findings"]}
    assert {"drift.mpi", "drift.nccl"} <= codes


def test_doctor_analyze_stdin_with_a_node_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    data = pasted("netns-ip-a.txt").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rc = main(["analyze", "-", "--node", "gpu9", "-f", "json"])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert list(json.loads(out)["nodes"]) == ["gpu9"]


def test_doctor_analyze_says_what_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "n1.txt").write_text("hello world\n")
    rc = main(["analyze", str(tmp_path / "n1.txt")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "no command output recognised" in err and "ip addr" in err


def test_doctor_analyze_names_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "$ lscpu\n" + pasted("lscpu.txt") + "$ ip a\n" + pasted("netns-ip-a.txt")
    (tmp_path / "n1.txt").write_text(text)
    main(["analyze", str(tmp_path / "n1.txt"), "-f", "json"])
    err = capsys.readouterr().err
    assert "n1.txt line 1: not understood, skipped: lscpu" in err


def test_nvidia_smi_and_ip_a_in_one_paste_find_driver_drift(tmp_path: Path) -> None:
    # Each node pasted nvidia-smi, then ip a, in one file: the NVIDIA kinds and the network
    # kinds split apart, and the two tables' drivers differ (470 against 570).
    ip = "$ ip a\n" + pasted("netns-ip-a.txt")
    fixtures = Path(__file__).parent.parent / "fixtures" / "nvidia"
    inputs = []
    for node, table in (("gpu1", "smi-table-classic.txt"), ("gpu2", "smi-table-wide.txt")):
        path = tmp_path / f"{node}.txt"
        path.write_text("$ nvidia-smi\n" + (fixtures / table).read_text() + ip)
        inputs.append(str(path))
    caps = read_inputs(inputs)
    kinds = [s["kind"] for s in caps["gpu1"].raw["probe"]["segments"]]
    assert kinds == ["nvidia-smi", "ip addr"]
    cluster = ClusterFacts(nodes={n: parse_node(n, c) for n, c in caps.items()})
    found = findings(run_checks(load_checks(), cluster))
    assert "drift.driver" in found
    assert {"470.182.03"} <= {
        found["drift.driver"].data["value"],
        found["drift.driver"].data["expected"],
    }
    report = Report.build("analyze", cluster, []).to_json()
    assert report["nodes"]["gpu2"]["facts"]["gpus"]["gpus"]
    assert report["nodes"]["gpu2"]["facts"]["net"]["interfaces"]
