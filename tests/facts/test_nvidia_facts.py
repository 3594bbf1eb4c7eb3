"""Driver and GPU facts. No GPU here: NVIDIA text comes from written fixtures (see
tests/fixtures/nvidia/README.md); the no-driver path is the real capture and the real child."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from capturekit import nvidia_child, nvidia_text, overlay, raw_capture

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.gpu import GpuFacts, sysfs_bus_id
from doctor.facts.nvidia.driver import DriverFacts, cuda_version, parse_driver, parse_nvrm
from doctor.facts.nvidia.gpus import parse_gpus, parse_smi_csv
from doctor.stages import probe

PROC = "/proc/driver/nvidia/version"


@pytest.mark.parametrize(
    ("fixture", "version", "flavour"),
    [
        ("proc-version-proprietary.txt", "535.183.06", "proprietary"),
        ("proc-version-open.txt", "570.133.20", "open"),
        ("proc-version-open-aarch64.txt", "565.57.01", "open"),
    ],
)
def test_nvrm_line_both_module_formats(fixture: str, version: str, flavour: str) -> None:
    assert parse_nvrm(nvidia_text(fixture)) == (version, flavour)


def test_nvrm_garbage_is_none() -> None:
    assert parse_nvrm("NVRM version: something else entirely\n") is None


def test_cuda_version_encoding() -> None:
    assert cuda_version(12080) == "12.8"
    assert cuda_version(12040) == "12.4"
    assert cuda_version(9020) == "9.2"


def test_real_cpu_node_has_no_driver_and_no_gpus() -> None:
    cap = Capture(raw_capture("cpu-torch-wheel"))
    driver, gpus = parse_driver(cap), parse_gpus(cap)
    assert isinstance(driver, Missing) and driver.kind == "absent"
    assert "no NVIDIA kernel module" in driver.reason
    assert isinstance(gpus, Missing) and gpus.kind == "absent"


def test_nvml_over_the_proc_file() -> None:
    cap = overlay(
        raw_capture("cpu-torch-wheel"),
        files={PROC: {"text": nvidia_text("proc-version-open.txt")}},
        commands={"nvidia": nvidia_child("nvml-2gpu.json")},
    )
    driver = parse_driver(cap)
    assert driver == DriverFacts("570.133.20", "570.133.20", "open", "12.8", None, None)
    gpus = parse_gpus(cap)
    assert isinstance(gpus, GpuFacts) and gpus.source == "nvml"
    first, second = gpus.gpus
    assert (first.bus_id, first.name, first.memory_total) == (
        "0000:07:00.0",
        "NVIDIA A100-SXM4-80GB",
        80 << 30,
    )
    assert (first.persistence_mode, first.ecc_enabled, first.ecc_uncorrected_aggregate) == (
        True,
        True,
        3,
    )
    assert second.persistence_mode is False
    assert (second.ecc_enabled, second.ecc_uncorrected_volatile) == (None, None)


def test_sysfs_module_version_when_procfs_is_hidden() -> None:
    cap = overlay(
        raw_capture("cpu-torch-wheel"),
        files={"/sys/module/nvidia/version": {"text": "550.90.07\n"}},
        commands={"nvidia": nvidia_child("nvml-mismatch.json")},
    )
    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts)
    assert (driver.version, driver.kernel_module, driver.cuda_version) == (
        "550.90.07",
        None,
        "12.8",
    )
    assert driver.nvml_error is not None and "version mismatch" in driver.nvml_error


def test_nvidia_smi_fallback_csv() -> None:
    gpus = parse_smi_csv(nvidia_text("nvidia-smi-query.csv"))
    assert [g.bus_id for g in gpus] == [
        "0000:18:00.0",
        "0000:2a:00.0",
        "0000:3a:00.0",
        "0000:5d:00.0",
    ]
    assert gpus[1].ecc_uncorrected_aggregate == 2 and gpus[1].ecc_corrected_volatile == 14
    assert gpus[2].persistence_mode is False
    assert gpus[3].memory_total == 46068 << 20
    assert (gpus[3].ecc_enabled, gpus[3].ecc_uncorrected_volatile) == (None, None)


def test_nvidia_smi_used_when_nvml_has_no_gpus() -> None:
    smi = {"argv": ["nvidia-smi"], "rc": 0, "stdout": nvidia_text("nvidia-smi-query.csv")}
    # nvidia-smi reports its own failure on stdout.
    failed = {"argv": ["nvidia-smi"], "rc": 9, "stdout": "NVIDIA-SMI has failed\n", "stderr": ""}
    base = raw_capture("cpu-torch-wheel")
    child = nvidia_child("nvml-mismatch.json")
    gpus = parse_gpus(overlay(base, commands={"nvidia": child, "nvidia-smi": smi}))
    assert isinstance(gpus, GpuFacts) and gpus.source == "nvidia-smi" and len(gpus.gpus) == 4
    broken = parse_gpus(overlay(base, commands={"nvidia": child, "nvidia-smi": failed}))
    assert isinstance(broken, Missing) and "NVIDIA-SMI has failed" in broken.reason


def test_bus_id_forms() -> None:
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id("0001:3b:00.1") == "0001:3b:00.1"
    assert sysfs_bus_id("3b:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id(" [N/A] ") == "[n/a]"


def test_the_real_child_without_a_driver() -> None:
    """The probe's NVIDIA child, run for real here: pynvml is installed, the driver is not."""
    out = subprocess.run(
        [sys.executable, "-c", probe.NVIDIA_SNIPPET, probe.NVIDIA_MARK],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith(probe.NVIDIA_MARK)]
    # The keys the written NVML fixtures start with (they add what NVML reports past init).
    assert set(json.loads(line[len(probe.NVIDIA_MARK) :])) == {
        "cuDriverGetVersion",
        "pynvml",
        "nvmlInit",
    }
    entry = {"argv": ["python3"], "rc": 0, "stdout": out.stdout, "stderr": out.stderr}
    cap = overlay(raw_capture("cpu-torch-wheel"), commands={"nvidia": entry})
    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts)
    assert isinstance(driver.version, Missing)
    assert driver.nvml_error is not None and "NVML Shared Library Not Found" in driver.nvml_error
    assert driver.libcuda_error is not None and "libcuda.so.1" in driver.libcuda_error
    gpus = parse_gpus(cap)
    assert isinstance(gpus, Missing) and "NVML Shared Library Not Found" in gpus.reason


def test_child_that_died_is_a_reason() -> None:
    entry = {"argv": ["python3"], "rc": -11, "stdout": "", "stderr": "Segmentation fault\n"}
    cap = overlay(
        raw_capture("cpu-torch-wheel"),
        files={PROC: {"text": nvidia_text("proc-version-proprietary.txt")}},
        commands={"nvidia": entry},
    )
    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts) and driver.version == "535.183.06"
    assert isinstance(driver.cuda_version, Missing)
    gpus = parse_gpus(cap)
    assert isinstance(gpus, Missing) and "Segmentation fault" in gpus.reason
