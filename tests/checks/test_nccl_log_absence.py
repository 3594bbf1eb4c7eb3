"""Absence is not a value: ranks of one job are compared only on what each of them showed.

The logs here are written from NCCL 2.21.5's format strings (NVIDIA/nccl tag v2.21.5-1):
param.cc "%s set by environment to %s.", init.cc "NCCL version %s", "Using network %s",
"comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"; and prefixed as
`kubectl logs --prefix` prints ("[pod/<name>/<container>] "). Nothing was captured: no GPU here.
"""

from __future__ import annotations

from typing import Any

from checks.nccl_log import drift
from doctor.core.model import Severity
from doctor.facts.nccl.log import parse_nccl_log
from tests.checks.test_nccl_log_checks import analyze


def pod(name: str, rank: int, ifname: bool) -> str:
    lines = [f"{name}:{40 + rank}:{40 + rank} [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
    if ifname:  # only some pods' lines held the setting: the excerpt was cut
        lines.append(f"{name}:{40 + rank}:{40 + rank} [0] NCCL INFO NCCL_SOCKET_IFNAME set by "
                     "environment to eth0")  # fmt: skip
    lines += [
        f"{name}:{40 + rank}:{50 + rank} [0] NCCL INFO Using network IBext",
        f"{name}:{40 + rank}:{50 + rank} [0] NCCL INFO comm 0x7f{rank} rank {rank} nRanks 4 "
        "nNodes 4 localRanks 1 localRank 0 MNNVL 0",
    ]
    return "\n".join(f"[pod/{name}/trainer] {line}" for line in lines)


FOUR_PODS = "\n".join(
    pod(f"pod-vf0{i + 1}", i, ifname=i >= 2) for i in range(4)
)  # pod-vf03 and pod-vf04 printed NCCL_SOCKET_IFNAME, pod-vf01 and pod-vf02 did not


def procs_of(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    doc = parse_nccl_log(text.splitlines()).to_json()
    return [(p["host"], p) for p in doc["processes"]]


def test_a_setting_some_ranks_did_not_print_is_not_a_difference() -> None:
    found = list(drift(procs_of(FOUR_PODS)))
    assert [f.code for f in found] == ["nccl.log.not_shown"]
    (info,) = found
    assert info.severity is Severity.INFO
    assert "NCCL_SOCKET_IFNAME=eth0 (2 of 4)" in info.summary


def test_a_setting_shown_with_two_values_is_a_difference_naming_how_many_showed_it() -> None:
    text = FOUR_PODS.replace(
        "SOCKET_IFNAME set by environment to eth0", "ALGO set by environment to Ring"
    )
    vf04 = "pod-vf04:43:43 [0] NCCL INFO NCCL_ALGO set by environment to"
    text = text.replace(f"{vf04} Ring", f"{vf04} Tree")
    (fail,) = [f for f in drift(procs_of(text)) if f.severity is Severity.FAIL]
    assert fail.code == "nccl.log.drift" and fail.nodes == ("pod-vf04",)  # a tie: first wins
    assert "NCCL_ALGO differs" in fail.summary and "(2 of 4 ranks showed it)" in fail.summary


def test_an_interface_per_node_is_a_warning_and_the_host_id_is_never_compared() -> None:
    text = FOUR_PODS.replace(
        "pod-vf04:43:43 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "pod-vf04:43:43 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to net1",
    )
    text += "".join(
        f"\npod-vf0{i + 1}:{40 + i}:{40 + i} [0] NCCL INFO NCCL_HOSTID set by environment to h{i}"
        for i in range(4)
    )
    (warn,) = drift(procs_of(text))
    assert warn.severity is Severity.WARN and "NCCL_SOCKET_IFNAME differs" in warn.summary


def test_lines_that_name_no_host_are_no_node_and_no_rank() -> None:
    # The excerpt's lines of one rank lost their "host:pid:tid [dev]" prefix (a collector that
    # cut them): they say another network, but nobody can tell which rank said it.
    text = FOUR_PODS + "\nNCCL INFO Using network Socket\nNCCL INFO NCCL version 2.18.5+cuda12.2"
    found = list(drift(procs_of(text)))
    assert [f.severity for f in found] == [Severity.INFO]
    assert all("?" not in f.nodes for f in found)


def test_analyze_of_four_pods_raises_no_failure(tmp_path: Any) -> None:
    report = analyze(tmp_path, job=FOUR_PODS)
    assert not [f for f in report["findings"] if f["severity"] == "fail"]
    assert [f["code"] for f in report["findings"] if f["code"].startswith("nccl.log")] == [
        "nccl.log.not_shown"
    ]


def test_a_node_whose_log_shows_no_version_does_not_drift_from_one_that_does(
    tmp_path: Any,
) -> None:
    with_version = pod("gpu1", 0, ifname=False)
    lines = pod("gpu2", 1, ifname=False).splitlines()
    without = "\n".join(line for line in lines if "version" not in line)
    report = analyze(tmp_path, gpu1=with_version, gpu2=without)
    assert not [f for f in report["findings"] if f["code"].startswith("drift.nccl")]


def test_a_setting_one_pasted_environment_does_not_show_is_not_unset(tmp_path: Any) -> None:
    # `env | grep NCCL_IB` on one node, `env | grep NCCL` on the other: NCCL_SOCKET_IFNAME is
    # not shown on the first, which says nothing of whether it is set there.
    report = analyze(
        tmp_path,
        gpu1="NCCL_IB_HCA=mlx5_0\n",
        gpu2="NCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME=eth0\n",
    )
    assert not [f for f in report["findings"] if f["code"] == "drift.nccl_env"]
    differ = analyze(tmp_path, gpu1="NCCL_IB_HCA=mlx5_0\n", gpu2="NCCL_IB_HCA=mlx5_1\n")
    assert [f["code"] for f in differ["findings"] if f["code"] == "drift.nccl_env"] == [
        "drift.nccl_env"
    ]
