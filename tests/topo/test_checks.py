"""Topology checks on facts parsed from the fixtures (sysfs trees, nvidia-smi text, fake NVML)."""

from __future__ import annotations

import json
from typing import Any

from checks.topo import (
    cross_check,
    gdr_reach,
    gpu_sockets,
    nvlink_health,
    p2p_status,
    topo_drift,
    topology_signature,
)
from doctor.core.capture import Capture
from doctor.core.model import CheckOutcome, Severity, Status
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.facts.topo.topology import Port, TopoFacts
from doctor.judge.runner import run_checks
from doctor.plugin import CheckSpec
from tests.topo.machines import hgx_h100, pcie_4gpu
from tests.topo.sysfs_tree import FIXTURES, capture, smi_text, tree_capture


def node(
    tree: str, nvml: dict[str, Any] | None = None, smi: str | None = None, name: str = "n1"
) -> NodeFacts:
    return parse_node(name, capture(tree, nvml, smi if smi is None else smi_text(smi)))


def run(spec: CheckSpec, *nodes: NodeFacts, baseline: NodeFacts | None = None) -> CheckOutcome:
    """The one outcome of a check over these nodes (node checks get a single node)."""
    cluster = ClusterFacts(nodes={n.node: n for n in nodes}, baseline=baseline)
    (outcome,) = run_checks([spec], cluster)
    return outcome


def codes(outcome: CheckOutcome) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in outcome.findings]


def test_gpus_split_across_sockets() -> None:
    outcome = run(gpu_sockets, node("dual-socket-pcie.tree", pcie_4gpu(bridged=False, p2p={})))
    assert codes(outcome) == [("topo.gpu.cross_socket", Severity.WARN)]
    (finding,) = outcome.findings
    assert finding.data["groups"] == [["GPU0", "GPU1"], ["GPU2", "GPU3"]]
    assert finding.nodes == ("n1",)
    assert "CUDA_VISIBLE_DEVICES=0,1" in finding.fix.commands[1]  # type: ignore[union-attr]


def test_nvlink_everywhere_is_not_split() -> None:
    assert run(gpu_sockets, node("hgx-8gpu-nvswitch.tree", hgx_h100())).status is Status.PASS


def test_no_gpu_skips_with_reason() -> None:
    raw = json.loads((FIXTURES / "sysfs" / "vm-virtio.capture.json").read_text())
    vm = parse_node("vm", Capture(raw))
    for spec in (gpu_sockets, gdr_reach, nvlink_health, p2p_status, cross_check):
        outcome = run(spec, vm)
        assert (outcome.status, outcome.reason) == (Status.SKIP, "no NVIDIA GPU on this node")


def test_gdr_close_nics_pass() -> None:
    assert run(gdr_reach, node("dual-socket-pcie.tree")).status is Status.PASS
    assert run(gdr_reach, node("hgx-8gpu-nvswitch.tree", hgx_h100())).status is Status.PASS


def test_gdr_far_nics_from_nvidia_smi_text() -> None:
    outcome = run(gdr_reach, node("dual-socket-pcie.tree", smi="k80-old-driver-soc.txt"))
    assert codes(outcome) == [
        ("topo.gdr.via_cpu", Severity.INFO),
        ("topo.gdr.cross_socket", Severity.WARN),
    ]
    cross = outcome.findings[1]
    assert cross.evidence == ("GPU2→mlx4_0 (SYS)", "GPU3→mlx4_0 (SYS)")


def test_gdr_skips_without_rdma_nic() -> None:
    outcome = run(gdr_reach, node("dual-socket-pcie.tree", smi="workstation-2gpu-phb.txt"))
    assert outcome.status is Status.SKIP
    assert outcome.reason == "no RDMA NIC on this node"


def test_nvlink_degraded_and_down() -> None:
    outcome = run(nvlink_health, node("hgx-8gpu-nvswitch.tree", hgx_h100(down={5: 2})))
    assert codes(outcome) == [
        ("topo.nvlink.degraded", Severity.FAIL),
        ("topo.nvlink.down", Severity.WARN),
    ]
    assert outcome.findings[0].summary.startswith("GPU5 has fewer NVLinks")


def test_nvlink_recoveries_and_errors_past_the_threshold_are_named() -> None:
    errors = {(2, 0): (3, 1, 40, 0), (2, 7): (0, 2, 0, 0), (6, 1): (12, 0, 900, 5), (7, 3): None}
    errors[(4, 2)] = (2, 0, 2, 0)  # 4 replay and CRC errors: under imbue's 5, not named
    facts = node("hgx-8gpu-nvswitch.tree", hgx_h100(errors=errors))
    outcome = run(nvlink_health, facts)
    assert codes(outcome) == [
        ("topo.nvlink.errors", Severity.WARN),
        ("topo.nvlink.recovery", Severity.WARN),
    ]
    counted, finding = outcome.findings
    assert counted.summary.startswith("NVLinks on GPU2, GPU6 counted 5 or more replay/CRC")
    assert counted.evidence[:2] == (
        "GPU2: replay 3, crc_flit 40, crc_data 0",
        "GPU6: replay 12, crc_flit 900, crc_data 5",
    )
    assert finding.summary.startswith("NVLinks on GPU2 failed and were retrained")
    assert finding.evidence == ("GPU2: replay 3, recovery 3, crc_flit 40, crc_data 0",)
    # GPU7's link 3 did not answer: its other links' counters still count.
    assert facts.topo.nvml[6].link_errors == {  # type: ignore[union-attr]
        "replay": 12,
        "recovery": 0,
        "crc_flit": 900,
        "crc_data": 5,
    }
    assert facts.topo.nvml[7].link_errors["recovery"] == 0  # type: ignore[union-attr]


def test_nvlink_healthy_mesh_and_nvswitch_pass() -> None:
    assert run(nvlink_health, node("hgx-8gpu-nvswitch.tree", hgx_h100())).status is Status.PASS
    mesh = node("dual-socket-pcie.tree", smi="dgx1-v100-cube-mesh-old-driver-spaces.txt")
    assert run(nvlink_health, mesh).status is Status.PASS


def test_nvlink_degraded_seen_in_nvidia_smi_text_alone() -> None:
    lines = smi_text("hgx-h100-nvswitch-nic-legend.txt").splitlines()
    # GPU3 lost links: its row and column show NV12 instead of NV18
    edited = []
    for line in lines:
        cells = line.split("\t")
        if cells[0] == "GPU3":
            cells = [c.replace("NV18", "NV12") for c in cells]
        elif cells[0].startswith("GPU") and len(cells) > 4:
            cells[4] = cells[4].replace("NV18", "NV12")
        edited.append("\t".join(cells))
    facts = parse_node("n1", capture("dual-socket-pcie.tree", None, "\n".join(edited)))
    outcome = run(nvlink_health, facts)
    assert codes(outcome) == [("topo.nvlink.degraded", Severity.FAIL)]
    assert outcome.findings[0].data["totals"]["GPU3"] == 7 * 12


def test_pcie_only_skips_nvlink() -> None:
    outcome = run(nvlink_health, node("dual-socket-pcie.tree", pcie_4gpu(bridged=False, p2p={})))
    assert (outcome.status, outcome.reason) == (Status.SKIP, "no NVLink between the GPUs")


def test_sysfs_alone_cannot_judge_nvlink_or_sockets() -> None:
    # An NVSwitch box whose driver answers nothing: sysfs shows NODE/SYS between GPUs that are
    # in fact NVLinked, so neither check may judge them.
    blind = node("hgx-8gpu-nvswitch.tree")
    for spec in (gpu_sockets, nvlink_health):
        outcome = run(spec, blind)
        assert outcome.status is Status.SKIP
        assert outcome.reason.startswith("NVLink unknown")


def test_p2p_disabled_on_nvlink_pair_fails() -> None:
    facts = node("dual-socket-pcie.tree", pcie_4gpu(bridged=True, p2p={(0, 1): 4, (1, 3): 3}))
    outcome = run(p2p_status, facts)
    assert codes(outcome) == [
        ("topo.p2p.disabled", Severity.FAIL)
    ]  # the SYS pair is NCCL's SHM anyway
    assert "DISABLED_BY_REGKEY" in outcome.findings[0].summary


def test_p2p_disabled_on_pcie_switch_pair_warns() -> None:
    facts = node("dual-socket-pcie.tree", pcie_4gpu(bridged=False, p2p={(2, 3): 4}))
    outcome = run(p2p_status, facts)
    assert codes(outcome) == [("topo.p2p.disabled", Severity.WARN)]
    assert outcome.findings[0].data["pair"] == "GPU2-GPU3"


def test_p2p_needs_nvml() -> None:
    outcome = run(p2p_status, node("dual-socket-pcie.tree"))
    assert outcome.status is Status.SKIP


def test_crosscheck_reports_disagreement() -> None:
    facts = node(
        "dual-socket-pcie.tree",
        pcie_4gpu(bridged=True, p2p={}),
        smi="dual-socket-pcie-4gpu-nic-legend.txt",
    )
    outcome = run(cross_check, facts)
    assert codes(outcome) == [("topo.crosscheck.mismatch", Severity.INFO)]
    assert "GPU0-GPU1: NV4 here, PIX in nvidia-smi topo -m" in outcome.findings[0].evidence


def test_drift_names_the_odd_node() -> None:
    healthy = [node("hgx-8gpu-nvswitch.tree", hgx_h100(), name=f"gpu{i}") for i in (1, 2, 4)]
    odd = node("hgx-8gpu-nvswitch.tree", hgx_h100(down={2: 6}), name="gpu3")
    outcome = run(topo_drift, *healthy, odd)
    (finding,) = outcome.findings
    assert (finding.code, finding.nodes) == ("topo.drift", ("gpu3",))
    assert "NV12" in finding.summary and "NV18×28" in finding.summary


def test_drift_same_nodes_pass_and_baseline_wins() -> None:
    a = node("hgx-8gpu-nvswitch.tree", hgx_h100(), name="gpu1")
    b = node("hgx-8gpu-nvswitch.tree", hgx_h100(), name="gpu2")
    assert run(topo_drift, a, b).status is Status.PASS
    base = node("hgx-8gpu-nvswitch.tree", hgx_h100(down={0: 18}), name="golden")
    outcome = run(topo_drift, a, b, baseline=base)
    assert {n for f in outcome.findings for n in f.nodes} == {"gpu1", "gpu2"}


def test_gdr_ignores_hca_whose_ports_are_down() -> None:
    # NCCL uses only ACTIVE ports: with mlx5_1's port down, GPU2/GPU3 reach mlx5_0 across sockets.
    raw = tree_capture("dual-socket-pcie.tree")
    raw["files"]["/sys/class/infiniband/mlx5_1/ports/1/state"] = {"text": "1: DOWN\n"}
    facts = parse_node("n1", Capture(raw))
    assert isinstance(facts.topo, TopoFacts)
    assert facts.topo.rdma == ("mlx5_0",)
    assert facts.topo.nics[1].ports == (Port("1", "DOWN", "InfiniBand", "400 Gb/sec (4X NDR)"),)
    outcome = run(gdr_reach, facts)
    assert codes(outcome) == [("topo.gdr.cross_socket", Severity.WARN)]
    assert outcome.findings[0].evidence == ("GPU2→mlx5_0 (SYS)", "GPU3→mlx5_0 (SYS)")


def test_same_machine_through_nvml_or_nvidia_smi_has_one_signature() -> None:
    via_nvml = node("hgx-8gpu-nvswitch.tree", hgx_h100(), name="gpu1")
    via_smi = node("hgx-8gpu-nvswitch.tree", smi="hgx-h100-nvswitch-nic-legend.txt", name="gpu2")
    assert (via_nvml.topo.source, via_smi.topo.source) == ("nvml", "nvidia-smi")  # type: ignore[union-attr]
    assert topology_signature(via_nvml) == topology_signature(via_smi)
    assert run(topo_drift, via_nvml, via_smi).status is Status.PASS
