"""GPU health checks on small facts: each code fires on its condition and only there."""

from __future__ import annotations

import dataclasses

import pytest

from checks import gpu_health as gh
from doctor.core.model import Missing, Status
from doctor.facts.gpu import Gpu, GpuFacts, GpuHealth, GpuProcess
from doctor.facts.nvidia.gpu_host import GpuHostFacts, XidEvent
from doctor.judge.runner import run_checks
from tests import factkit as fk


def gpu(index: int = 0, **health: object) -> Gpu:
    base = {
        k: health.pop(k) for k in list(health) if k in {f.name for f in dataclasses.fields(Gpu)}
    }
    fields = dict(
        index=index,
        name="NVIDIA H100",
        bus_id=f"0000:{index + 7:02x}:00.0",
        uuid=None,
        memory_total=80 << 30,
        persistence_mode=True,
        ecc_enabled=True,
        ecc_uncorrected_volatile=0,
        ecc_uncorrected_aggregate=0,
        ecc_corrected_volatile=0,
    )
    fields.update(base)
    return Gpu(**fields, health=GpuHealth(**health))  # type: ignore[arg-type]


def run(check, *gpus: Gpu, **areas: object):
    facts = fk.node(gpus=GpuFacts(tuple(gpus), "nvml"), **areas)
    (result,) = run_checks([check], fk.cluster(facts))
    return result


def codes(check, *gpus: Gpu, **areas: object) -> list[str]:
    return [f.code for f in run(check, *gpus, **areas).findings]


HEALTHY = dict(
    compute_mode="default",
    mig=False,
    pcie_gen=4,
    pcie_gen_max=4,
    pcie_width=16,
    pcie_width_max=16,
    throttle=(),
    remap_pending=False,
    remap_failed=False,
    retired_pending=False,
    processes=(),
)


@pytest.mark.parametrize("check", gh.CHECKS[:6])
def test_healthy_gpu_passes(check) -> None:
    assert run(check, gpu(**HEALTHY)).status is Status.PASS


@pytest.mark.parametrize("check", [gh.memory_repair, gh.pcie, gh.throttle, gh.modes, gh.processes])
def test_fields_not_reported_skip_with_reason(check) -> None:
    result = run(check, gpu(persistence_mode=None))
    assert result.status is Status.SKIP and "does not report" in (result.reason or "")


def test_no_gpu_facts_skip() -> None:
    (result,) = run_checks([gh.ecc], fk.cluster(fk.node()))
    assert result.status is Status.SKIP


def test_ecc() -> None:
    assert codes(gh.ecc, gpu(ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=2)) == [
        "gpu.ecc.volatile"
    ]
    assert codes(gh.ecc, gpu(1, ecc_uncorrected_aggregate=5)) == ["gpu.ecc.aggregate"]


def test_memory_repair() -> None:
    assert codes(gh.memory_repair, gpu(remap_failed=True, remap_pending=False)) == [
        "gpu.remap.failed"
    ]
    assert codes(gh.memory_repair, gpu(remap_pending=True)) == ["gpu.remap.pending"]
    assert codes(gh.memory_repair, gpu(retired_pending=True)) == ["gpu.retired.pending"]


def test_pcie_width_and_gen_only_under_load() -> None:
    narrow = dict(HEALTHY, pcie_width=8)
    assert codes(gh.pcie, gpu(**narrow)) == ["gpu.pcie.width"]
    idle_slow = dict(HEALTHY, pcie_gen=1, throttle=("idle",))
    assert codes(gh.pcie, gpu(**idle_slow)) == []
    busy_slow = dict(HEALTHY, pcie_gen=3, throttle=("sw_power_cap",))
    assert codes(gh.pcie, gpu(**busy_slow)) == ["gpu.pcie.gen"]


def test_throttle_counts_only_protection() -> None:
    assert codes(gh.throttle, gpu(throttle=("idle", "sw_power_cap"))) == []
    result = run(gh.throttle, gpu(throttle=("hw_power_brake_slowdown",)))
    assert [f.code for f in result.findings] == ["gpu.throttle"]
    assert "hw_power_brake_slowdown" in result.findings[0].evidence[0]


def test_modes() -> None:
    assert codes(gh.modes, gpu(persistence_mode=False)) == ["gpu.persistence.off"]
    assert codes(gh.modes, gpu(compute_mode="prohibited")) == ["gpu.compute_mode.blocking"]
    assert codes(gh.modes, gpu(compute_mode="exclusive_process")) == ["gpu.compute_mode.exclusive"]
    assert codes(gh.modes, gpu(mig=True)) == ["gpu.mig.enabled"]


def test_processes() -> None:
    procs = (GpuProcess(4242, "python", 2 << 30),)
    result = run(gh.processes, gpu(processes=procs))
    assert [f.code for f in result.findings] == ["gpu.processes.other"]
    assert "pid 4242 python 2048 MiB" in result.findings[0].evidence[0]


def test_xid() -> None:
    host = GpuHostFacts(
        (XidEvent("0000:07:00", 79, "fallen off"), XidEvent("0000:07:00", 13, "")), False
    )
    assert codes(gh.xid, gpu(), gpu_host=host) == ["gpu.xid.hardware", "gpu.xid.other"]
    unreadable = GpuHostFacts(Missing("dmesg_restrict", "unreadable"), False)
    result = run(gh.xid, gpu(), gpu_host=unreadable)
    assert result.status is Status.SKIP and "dmesg_restrict" in (result.reason or "")
    assert codes(gh.xid, gpu(), gpu_host=GpuHostFacts((), True)) == []


def test_fabric() -> None:
    switch = fk.PciDevice("0000:a0:00.0", 0x10DE, 0x22A3, 0x068000, None, 0, None, ())
    assert codes(gh.fabric, gpu(), pci=[switch], gpu_host=GpuHostFacts((), False)) == [
        "gpu.fabric.manager"
    ]
    assert codes(gh.fabric, gpu(), pci=[switch], gpu_host=GpuHostFacts((), True)) == []
    assert codes(gh.fabric, gpu(fabric_state="in_progress")) == ["gpu.fabric.not_ready"]
    assert run(gh.fabric, gpu()).status is Status.SKIP


def test_a_real_gpus_fabric_state_is_read_and_judged_without_nvswitch() -> None:
    """The H200 probed before the fix (the binding called without its struct: no state) and
    after it (tests/fixtures/gpu/h200/probe-fabric.json: NVML's 0, not supported). A GPU
    without an NVLink fabric skips the fabric check, never fails it."""
    import json
    from pathlib import Path

    from doctor.core.capture import Capture
    from doctor.facts.node import parse_node
    from doctor.facts.nvidia.gpus import parse_gpus

    h200 = Path(__file__).parents[1] / "fixtures" / "gpu" / "h200"
    states = []
    for name in ("probe.json", "probe-fabric.json"):
        raw = json.loads((h200 / name).read_text())
        gpus = parse_gpus(Capture(raw))
        assert isinstance(gpus, GpuFacts)
        states.append(gpus.gpus[0].health.fabric_state)
        (outcome,) = run_checks([gh.fabric], fk.cluster(parse_node("vm", Capture(raw))))
        assert outcome.status == Status.SKIP
    assert states == [None, "not_supported"]
