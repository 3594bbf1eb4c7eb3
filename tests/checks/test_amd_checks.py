"""AMD checks on the facts the real probe reads from written MI300X nodes (tests/amdtree.py;
no AMD GPU here): XGMI, RCCL's host settings, GPUDirect RDMA, the GID index, ROCm drift, and
the vendor-neutral GPU checks (count, PCIe, ECC, bad pages, processes) on AMD GPUs."""

from __future__ import annotations

import os
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from checks.amd import CHECKS as AMD_CHECKS
from checks.gpu_count import count
from checks.gpu_health import CHECKS as HEALTH_CHECKS
from checks.gpu_vitals import CHECKS as VITALS_CHECKS
from checks.rdma import gid_index
from doctor.core.capture import Capture
from doctor.core.model import Finding, Status
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.runner import run_checks
from doctor.nic.plan import with_plan
from doctor.nodes.inventory import Node
from tests import factkit as fk
from tests.amdtree import AmdNode, write_amd_node
from tests.conftest import run_probe

HEALTHY = AmdNode()
BROKEN = AmdNode(
    missing_xgmi=((0, 5),),
    narrow={3: 8},
    ras_ue={2: 3},
    pending_pages={2: 2},
    numa_balancing="1",
    cmdline="BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro",
    processes={4242: ("python3", 1)},
    peer_memory=False,
    hca=True,
)


_PROBED: dict[str, dict[str, Any]] = {}


def _facts(node: AmdNode, name: str = "mi300x-1", **env: str) -> NodeFacts:
    """The real probe's reading of a written node (one run per node and environment)."""
    key = repr((node, sorted(env.items())))  # AmdNode holds dicts: not hashable itself
    if key not in _PROBED:
        with TemporaryDirectory() as tmp:
            write_amd_node(Path(tmp), node)
            _PROBED[key] = run_probe({"root": tmp}, env={**os.environ, **env})
    return with_plan(parse_node(name, Capture(_PROBED[key])))


def _findings(checks: list, cluster: ClusterFacts) -> dict[str, Finding]:
    out = {}
    for result in run_checks(checks, cluster):
        assert result.status is not Status.CRASH, (result.check, result.reason)
        out.update({f.code: f for f in result.findings})
    return out


def test_a_healthy_amd_node_passes_every_amd_and_gpu_check() -> None:
    assert _findings(AMD_CHECKS + HEALTH_CHECKS + VITALS_CHECKS, fk.cluster(_facts(HEALTHY))) == {}


def test_an_amd_gpu_near_its_junction_limit_and_xgmi_errors() -> None:
    facts = _facts(AmdNode(junction={6: 107}, xgmi_ue={7: 1}))
    gpus = facts.gpus.gpus  # type: ignore[union-attr]
    assert (gpus[0].health.temperature, gpus[0].health.slowdown_margin) == (45, 65)
    assert gpus[0].health.vbios == "113-M3000100-102"
    found = _findings(VITALS_CHECKS, fk.cluster(facts))
    assert set(found) == {"gpu.thermal.margin", "gpu.xgmi.errors"}
    assert (
        found["gpu.thermal.margin"].evidence[0]
        == "GPU6 (0000:a5:00.0): 107 °C, 3 °C before slowdown"
    )
    assert found["gpu.xgmi.errors"].evidence == ("GPU7 (0000:b5:00.0): xgmi_wafl uncorrectable 1",)
    # Corrected XGMI errors (2 on every GPU here) are the link doing its job: not named.


def test_a_broken_amd_node_gets_each_finding_with_amd_fixes() -> None:
    found = _findings(AMD_CHECKS + HEALTH_CHECKS, fk.cluster(_facts(BROKEN)))
    assert set(found) == {
        "amd.xgmi.missing",
        "amd.numa_balancing",
        "amd.iommu",
        "amd.fine_grain_pcie",
        "amd.no_gdr",
        "gpu.pcie.width",
        "gpu.ecc.volatile",
        "gpu.retired.pending",
        "gpu.processes.other",
    }
    xgmi = found["amd.xgmi.missing"]
    assert xgmi.evidence == (
        "GPU0 (0000:05:00.0) ↔ GPU5 (0000:95:00.0): no link in the KFD topology",
    )
    assert found["gpu.pcie.width"].evidence == ("GPU3 (0000:35:00.0): x8 of x16",)
    assert found["gpu.ecc.volatile"].evidence == ("GPU2 (0000:25:00.0): 3",)
    for code in ("gpu.ecc.volatile", "gpu.retired.pending", "gpu.processes.other"):
        fix = found[code].fix
        assert fix is not None and fix.commands and not any("nvidia" in c for c in fix.commands)
    assert "pid 4242 python3" in found["gpu.processes.other"].evidence[0]


def test_dmabuf_stands_in_for_peer_memory_only_when_enabled_and_built() -> None:
    built = AmdNode(peer_memory=False, hca=True, dmabuf_config=True)
    gdr = [c for c in AMD_CHECKS if c.id == "amd.gdr"]
    assert "amd.no_gdr" in _findings(gdr, fk.cluster(_facts(built)))
    enabled = _facts(built, NCCL_DMABUF_ENABLE="1")
    assert _findings(gdr, fk.cluster(enabled)) == {}


def test_gid_index_must_name_a_roce_v2_gid() -> None:
    node = AmdNode(hca=True)
    (wrong,) = _findings([gid_index], fk.cluster(_facts(node, NCCL_IB_GID_INDEX="2"))).values()
    assert wrong.code == "rdma.gid_index"
    assert wrong.evidence[0] == (
        "mlx5_0 port 1: gid 2 is IB/RoCE v1 (0000:0000:0000:0000:0000:ffff:0a00:0001)"
    )
    assert "export NCCL_IB_GID_INDEX=3" in (wrong.fix.commands if wrong.fix else ())
    assert _findings([gid_index], fk.cluster(_facts(node, NCCL_IB_GID_INDEX="3"))) == {}
    (unset,) = run_checks([gid_index], fk.cluster(_facts(node)))
    assert unset.status is Status.SKIP


def test_two_nodes_with_other_rocm_and_amdgpu_get_the_drift_findings() -> None:
    a, b = _facts(HEALTHY, "mi300x-1"), _facts(HEALTHY, "mi300x-2")
    c = _facts(AmdNode(rocm="6.3.0-39", amdgpu="6.10.5", sos_firmware="0x00380007"), "mi300x-3")
    found = _findings(AMD_CHECKS, fk.cluster(a, b, c))
    assert found["drift.rocm"].nodes == ("mi300x-3",)
    assert found["drift.rocm"].data == {"value": "6.3.0-39", "expected": "6.2.1-112"}
    assert found["drift.amdgpu"].nodes == ("mi300x-3",)
    assert found["drift.amd_firmware"].nodes == ("mi300x-3",)
    assert "sos 0x00380007" in found["drift.amd_firmware"].summary


def test_gpu_count_against_the_others_and_the_slots() -> None:
    a, b = _facts(HEALTHY, "mi300x-1"), _facts(HEALTHY, "mi300x-2")
    short = _facts(AmdNode(gpus=7), "mi300x-3")
    inventory = {"mi300x-1": Node("mi300x-1", slots=16)}
    cluster = ClusterFacts({n.node: n for n in (a, b, short)}, inventory=inventory)
    found = _findings([count], cluster)
    assert found["gpu.count.differs"].nodes == ("mi300x-3",)
    assert found["gpu.count.slots"].data == {"slots": 16, "gpus": 8}


def test_a_mixed_nvidia_and_amd_cluster_is_reported_not_crashed() -> None:
    from doctor.judge.registry import load_checks

    nvidia = fk.node("h100-1", pci=[fk.gpu()], driver=fk.driver())
    results = run_checks(load_checks(), fk.cluster(nvidia, _facts(HEALTHY)))
    assert results and all(r.status is not Status.CRASH for r in results)


def test_amd_gpus_without_amdgpu_fail_and_bound_ones_pass() -> None:
    from checks.amd import driver
    from doctor.facts.pci import PciDevice

    def mi300x(address: str, bound: str | None) -> PciDevice:
        return PciDevice(address, 0x1002, 0x74A1, 0x120000, bound, 0, "0-95", (address,))

    bad = fk.node(pci=[mi300x("0000:05:00.0", "amdgpu"), mi300x("0000:15:00.0", None)])
    (finding,) = _findings([driver], fk.cluster(bad)).values()
    assert finding.code == "amd.driver.missing"
    assert finding.evidence == ("0000:15:00.0: driver none",)
    (ok,) = run_checks([driver], fk.cluster(_facts(HEALTHY)))
    assert ok.status is Status.PASS
