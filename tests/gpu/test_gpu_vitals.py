"""GPU vitals from nvidia-smi -q (text and XML, both layouts), --query-gpu CSV and pasted
warnings, judged by gpu.thermal, gpu.ecc_correctable, gpu.board and gpu.env. The real H100 and
H200 captures are healthy and stay clean; the written fixtures carry one problem per GPU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from checks import gpu_vitals as gv
from doctor.core.model import Status
from doctor.facts.gpu import GpuFacts
from doctor.facts.node import parse_node
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from tests import factkit as fk
from tests.gpu.test_gpu_health_checks import gpu, run
from tests.paste.pastekit import read_text

FIXTURES = Path(__file__).parent.parent / "fixtures"
VITALS = ("gpu.thermal", "gpu.ecc_correctable", "gpu.board", "gpu.env")


def gpus_of(text: str) -> GpuFacts:
    found = parse_node("n1", read_text(text)).gpus
    assert isinstance(found, GpuFacts), found
    return found


def judged(text: str) -> dict[str, list[tuple[str, list[str]]]]:
    """Each vitals check's findings on a paste: code → [(summary, evidence)]."""
    node = parse_node("n1", read_text(text))
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for o in run_checks(load_checks(), fk.cluster(node)):
        for f in o.findings:
            out.setdefault(f.code, []).append((f.summary, list(f.evidence)))
    return out


def test_the_real_h100_and_h200_captures_read_and_stay_clean() -> None:
    for sku, margin, replays in (("h100", 57, 0), ("h200", 55, 2)):
        for name in ("nvidia-smi-q.xml", "probe.json"):
            text = (FIXTURES / "gpu" / sku / name).read_text()
            node = parse_node("vm", read_text(text))
            outcomes = [o for o in run_checks(load_checks(), fk.cluster(node))]
            assert not [f for o in outcomes if o.check in VITALS for f in o.findings], (sku, name)
        (one,) = gpus_of((FIXTURES / "gpu" / sku / "nvidia-smi-q.xml").read_text()).gpus
        health = one.health
        assert (health.slowdown_margin, health.pcie_replays) == (margin, replays)
        assert (health.power_limit, health.power_default) == (700.0, 700.0)
        assert health.app_clock == health.app_clock_default == 1980
        assert health.firmware == "580.159.04" and health.vbios and health.inforom_version
        assert (health.ecc_sram_corrected, health.ecc_dram_corrected) == (0, 0)
        assert health.sram_threshold_exceeded is False


def test_a_healthy_text_report_stays_clean() -> None:
    text = (FIXTURES / "nvidia" / "smi-q-vitals-healthy.txt").read_text()
    margins = [g.health.slowdown_margin for g in gpus_of(text).gpus]
    assert margins == [57, 54]  # T.Limit 55 and 52, slowdown at -2 on that scale
    assert not judged(text).keys() & {
        "gpu.thermal.margin",
        "gpu.thermal.slowdown",
        "gpu.ecc.sram_correctable",
        "gpu.pcie.replays",
        "gpu.power.capped",
        "gpu.clocks.lowered",
        "gpu.vbios.mixed",
    }
    assert judged(text) == {}


def test_one_problem_per_gpu_each_named() -> None:
    text = (FIXTURES / "nvidia" / "smi-q-vitals-degraded.txt").read_text()
    found = judged(text)
    named = {code: [s.split(":")[0] for s, _ in f] for code, f in found.items()}
    assert set(named) == {
        "gpu.thermal.margin",
        "gpu.thermal.slowdown",
        "gpu.power.capped",
        "gpu.clocks.lowered",
        "gpu.ecc.sram_threshold",
        "gpu.ecc.sram_correctable",
        "gpu.pcie.replays",
        "gpu.vbios.mixed",
    }
    assert "GPU0 (0000:18:00.0): 86 °C, 3 °C before slowdown" in found["gpu.thermal.margin"][0][1]
    assert (
        "GPU1 (0000:2a:00.0): 91 °C, -1 °C before slowdown" in found["gpu.thermal.slowdown"][0][1]
    )
    assert found["gpu.power.capped"][0][1] == ["GPU2 (0000:3a:00.0): 500 W of 700 W"]
    assert found["gpu.ecc.sram_correctable"][0][1][0] == "GPU3 (0000:5d:00.0): 15000"
    assert found["gpu.pcie.replays"][0][1][0] == "GPU4 (0000:9a:00.0): 412"
    # Each absolute finding quotes the threshold and its source.
    assert found["gpu.ecc.sram_correctable"][0][1][-1].endswith("= 10,000 count (absolute)")
    assert found["gpu.pcie.replays"][0][1][-1].endswith("gpu.pcie_replays = 80 count (absolute)")


def test_the_older_layout_reads_absolute_temperatures_and_single_bit_counts() -> None:
    text = (FIXTURES / "nvidia" / "smi-q-vitals-legacy.txt").read_text()
    healthy, hot = gpus_of(text).gpus
    assert (healthy.health.slowdown_margin, healthy.health.memory_margin) == (56, 58)
    assert (hot.health.slowdown_margin, hot.health.ecc_dram_corrected) == (2, 25_000_000)
    assert (healthy.health.power_limit, healthy.health.power_default) == (400.0, 400.0)
    found = judged(text)
    assert set(found) == {"gpu.thermal.margin", "gpu.thermal.memory", "gpu.ecc.dram_correctable"}
    # A100s ship with applications clocks below their maximum: that is their default, not a cap.
    assert "gpu.clocks.lowered" not in found
    assert found["gpu.ecc.dram_correctable"][0][0].startswith(
        "1 GPU(s) corrected more DRAM ECC errors in their life than 20,000,000"
    )


def test_a_corrupted_inforom_warning_is_read_with_or_without_a_report() -> None:
    warning = "WARNING: infoROM is corrupted at gpu 0000:04:00.0\n"
    table = (FIXTURES / "nvidia" / "smi-table-wide.txt").read_text()
    assert judged(warning)["gpu.inforom.corrupt"][0][1] == ["0000:04:00.0: infoROM is corrupted"]
    both = judged(warning + table)["gpu.inforom.corrupt"]
    assert len(both) == 1 and "infoROM is corrupted" in both[0][1][0]
    assert "gpu.inforom.corrupt" not in judged(table)


def test_csv_columns_give_the_vitals_they_name() -> None:
    csv = (
        "index, name, pci.bus_id, temperature.gpu, power.limit [W], power.default_limit [W], "
        "clocks.applications.graphics [MHz], clocks.default_applications.graphics [MHz], "
        "vbios_version\n"
        "0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 34, 450.00 W, 700.00 W, 1980 MHz, "
        "1980 MHz, 96.00.99.00.01\n"
    )
    (one,) = gpus_of(csv).gpus
    assert (one.health.temperature, one.health.power_limit, one.health.power_default) == (
        34,
        450.0,
        700.0,
    )
    assert one.health.vbios == "96.00.99.00.01"
    assert [c for c in judged(csv) if c.startswith("gpu.power")] == ["gpu.power.capped"]


def test_thermal_thresholds_and_their_override(
    thresholds: Callable[[dict[str, Any]], None],
) -> None:
    warm = gpu(0, slowdown_margin=4, temperature=84)
    assert [f.code for f in run(gv.thermal, warm).findings] == ["gpu.thermal.margin"]
    assert run(gv.thermal, gpu(0, slowdown_margin=5)).status is Status.PASS
    facts = fk.node(gpus=GpuFacts((gpu(0, slowdown_margin=6),), "nvml"))
    thresholds({"gpu.thermal_margin_c": 8})
    (outcome,) = run_checks([gv.thermal], fk.cluster(facts))
    assert [f.code for f in outcome.findings] == ["gpu.thermal.margin"]
    assert "doctor.toml" in outcome.findings[0].evidence[-1]
    assert run(gv.thermal, gpu(0)).reason == "no GPU reports its margin to thermal slowdown"


def test_cuda_debug_variables() -> None:
    env = {"CUDA_INJECTION64_PATH": "/opt/nsight/libinj.so", "CUDA_LAUNCH_BLOCKING": "1"}
    outcome = run(gv.cuda_env, gpu(0), env=env)
    (finding,) = outcome.findings
    assert finding.code == "gpu.env.debug"
    assert finding.fix is not None
    assert finding.fix.commands == ("unset CUDA_INJECTION64_PATH", "unset CUDA_LAUNCH_BLOCKING")
    assert run(gv.cuda_env, gpu(0), env={"CUDA_LAUNCH_BLOCKING": "0"}).status is Status.PASS
    assert run(gv.cuda_env, env=env).status is Status.SKIP  # no GPU: nothing it changes
