"""Firmware and driver drift across nodes and within one, and EFA's provider and GDRCopy."""

from __future__ import annotations

from pathlib import Path

from checks import rdma
from checks.links import firmware
from doctor.core.model import Status
from doctor.facts.gpu import GpuFacts
from doctor.facts.network.rdma import Hca, Port, RdmaFacts
from doctor.facts.node import parse_node
from doctor.judge.runner import run_checks
from tests import factkit as fk
from tests.gpu.test_gpu_health_checks import gpu
from tests.paste.pastekit import pasted, read_text

H100_XML = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100" / "nvidia-smi-q.xml"


def pasted_node(name: str, text: str):  # type: ignore[no-untyped-def]
    return parse_node(name, read_text(text))


def test_hca_firmware_and_vbios_drift_name_the_odd_node() -> None:
    ibstat = pasted("written-ibstat-ndr.txt")
    xml = H100_XML.read_text()
    nodes = [pasted_node(f"gpu{i}", ibstat + xml) for i in (1, 2)]
    odd = ibstat.replace("28.39.1002", "28.41.1000") + xml.replace(
        "96.00.DA.00.0C", "96.00.99.00.01"
    )
    nodes.append(pasted_node("gpu3", odd))
    (outcome,) = run_checks([firmware.drift], fk.cluster(*nodes))
    found = {f.code: f for f in outcome.findings}
    assert set(found) == {"drift.hca_firmware", "drift.gpu_vbios"}
    assert found["drift.hca_firmware"].nodes == ("gpu3",)
    assert found["drift.hca_firmware"].data["expected"] == "MT4129 28.39.1002"
    assert found["drift.gpu_vbios"].data["value"] == "NVIDIA H100 80GB HBM3 96.00.99.00.01"
    # A pasted node shows no /sys/module: its RDMA driver is unknown, not "none".
    assert "drift.rdma_driver" not in found


def test_one_node_with_two_hca_firmwares() -> None:
    text = pasted("written-ibstat-ndr.txt").replace(
        "CA 'mlx5_7'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002",
        "CA 'mlx5_7'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.36.1010",
    )
    (outcome,) = run_checks([firmware.mixed_hca_firmware], fk.cluster(pasted_node("n1", text)))
    (finding,) = outcome.findings
    assert finding.code == "rdma.firmware.mixed" and "28.36.1010: mlx5_7" in finding.evidence
    assert finding.fix is not None and finding.fix.commands == ("mlxfwmanager --query -d mlx5_7",)
    clean = pasted_node("n1", pasted("written-ibstat-ndr.txt"))
    assert run_checks([firmware.mixed_hca_firmware], fk.cluster(clean))[0].status is Status.PASS


def _efa(provider: bool, modules: dict[str, str]) -> RdmaFacts:
    port = Port(1, 4, "ACTIVE", "LinkUp", 100.0, "Unknown", ())
    hca = Hca("rdmap16s27", None, None, "0000:10:1b.0", (), (port,), driver="efa")
    return RdmaFacts((hca,), ("uverbs0",), True, None, modules=modules, efa_provider=provider)


def test_efa_without_its_provider_and_without_gdrcopy() -> None:
    gpus = GpuFacts((gpu(0),), "nvml")
    node = fk.node(rdma=_efa(False, {"efa": ""}), pci=[fk.gpu()], gpus=gpus)
    (outcome,) = run_checks([rdma.efa], fk.cluster(node))
    assert [(f.code, str(f.severity)) for f in outcome.findings] == [
        ("rdma.efa.no_provider", "warn"),
        ("rdma.efa.no_gdrcopy", "info"),
    ]
    good = fk.node(rdma=_efa(True, {"efa": "", "gdrdrv": "2.4"}), pci=[fk.gpu()])
    assert run_checks([rdma.efa], fk.cluster(good))[0].status is Status.PASS
    ib = pasted_node("n1", pasted("written-ibstat-ndr.txt"))
    assert run_checks([rdma.efa], fk.cluster(ib))[0].reason.startswith("no EFA device")
