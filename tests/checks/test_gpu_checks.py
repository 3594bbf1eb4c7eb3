"""gpu.driver: fails where NVIDIA GPUs have no usable driver, skips where there are none."""

from __future__ import annotations

from checks.gpu import gpu_driver
from doctor.core.model import Missing, Status
from doctor.judge.runner import run_checks
from tests import factkit as fk


def outcome(facts):
    (result,) = run_checks([gpu_driver], fk.cluster(facts))
    return result


def codes(facts) -> list[str]:
    return [f.code for f in outcome(facts).findings]


def test_real_cpu_machine_is_skipped_with_a_reason() -> None:
    result = outcome(fk.real("cpu-torch-wheel"))
    assert result.status is Status.SKIP
    assert result.reason == "no NVIDIA GPU on the PCI bus"


def test_nic_only_node_is_skipped() -> None:
    assert outcome(fk.node(pci=[fk.nic()])).status is Status.SKIP


def test_gpus_without_driver_fail() -> None:
    facts = fk.node(
        pci=[fk.gpu("0000:07:00.0", None), fk.gpu("0000:0f:00.0", "nouveau")],
        driver=Missing("no NVIDIA kernel module loaded", "absent"),
    )
    result = outcome(facts)
    assert result.status is Status.FAIL
    (finding,) = result.findings
    assert finding.code == "driver.missing" and finding.nodes == ("node1",)
    assert "2 NVIDIA GPU(s)" in finding.summary
    assert any("none, nouveau" in e for e in finding.evidence)
    assert finding.fix is not None and "sudo modprobe nvidia && nvidia-smi" in finding.fix.commands


def test_healthy_driver_passes() -> None:
    assert outcome(fk.node(pci=[fk.gpu()], driver=fk.driver())).status is Status.PASS


def test_version_mismatch_is_unloadable_with_the_reload_fix() -> None:
    broken = fk.driver(
        nvml_error="NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch."
    )
    (finding,) = outcome(fk.node(pci=[fk.gpu()], driver=broken)).findings
    assert finding.code == "driver.unloadable"
    assert "NVML fails" in finding.summary
    assert finding.fix is not None and any("rmmod" in c for c in finding.fix.commands)


def test_missing_libcuda_in_a_container_is_unloadable() -> None:
    broken = fk.driver(libcuda_error="OSError: libcuda.so.1: cannot open shared object file")
    (finding,) = outcome(fk.node(pci=[fk.gpu()], driver=broken)).findings
    assert finding.code == "driver.unloadable"
    assert finding.fix is not None and "docker run --gpus all ..." in finding.fix.commands


def test_unreadable_pci_skips() -> None:
    result = outcome(fk.node(pci=Missing("/sys/bus/pci/devices: Permission denied", "unreadable")))
    assert result.status is Status.SKIP and "Permission denied" in result.reason
