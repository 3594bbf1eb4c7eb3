"""The probe's NVIDIA child, run for real against a stand-in pynvml (a MOCK of NVML: no GPU here).

The child is the code that will meet a real driver first, and only there; here it runs as the
probe runs it (a separate ``python3 -c``), with a module named pynvml first on its path that
answers every call it makes with the shapes nvidia-ml-py's pynvml.py documents: structs with
``busId``/``total``/``pid``/``usedGpuMemory`` attributes, the fabric's struct filled by reference
(its ``c_nvmlGpuFabricInfo_t``), bytes for strings in older bindings, tuples for MIG mode and
remapped rows, ``NVMLError_NotSupported`` where a GPU does not support a query. A misspelt call
or a changed shape in the child fails here, not on a cluster.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from capturekit import overlay, raw_capture

from doctor.facts.gpu import GpuFacts
from doctor.facts.nvidia.driver import DriverFacts, parse_driver
from doctor.facts.nvidia.gpus import parse_gpus
from doctor.stages import probe

FAKE_PYNVML = '''
"""MOCK pynvml for tests/facts/test_nvml_child.py: two GPUs, the second an older one."""
import ctypes
from types import SimpleNamespace


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_CorruptedInforom(NVMLError):
    pass


GPUS = [
    dict(name=b"NVIDIA H100 80GB HBM3", uuid="GPU-11111111-2222-3333-4444-555555555555",
         bus=b"00000000:1B:00.0", persistence=1, ecc=(1, 1), unc_volatile=0, unc_aggregate=0,
         corrected=4, compute=0, mig=(0, 0), gen=(5, 5), width=(16, 16), throttle=0x1,
         retired=([], []), retired_pending=0, remapped=(0, 0, 0, 0),
         procs=[SimpleNamespace(pid=4242, usedGpuMemory=1 << 30)], fabric=3,
         temp=41, slowdown=87, power=(700000, 700000), sram=(12, 0), dram=3, inforom=True,
         replays=3, clocks=(1980, 2619), vbios=b"96.00.99.00.01", gsp=b"550.90.07"),
    dict(name="Tesla V100-SXM2-32GB", uuid="GPU-66666666-7777-8888-9999-000000000000",
         bus="00000000:3B:00.0", persistence=0, ecc=(1, 1), unc_volatile=2, unc_aggregate=7,
         corrected=0, compute=3, mig=None, gen=(1, 3), width=(8, 16), throttle=0x8 | 0x40,
         retired=([0x1000], [0x2000, 0x3000]), retired_pending=1, remapped=None,
         procs=[], fabric=None,
         temp=88, slowdown=None, power=(250000, 300000), sram=None, dram=None, inforom=False,
         replays=None, clocks=(1230, 877), vbios="88.00.4F.00.09", gsp=None),
]


def _gpu(h):
    return GPUS[h]


def _maybe(value):
    if value is None:
        raise NVMLError_NotSupported("Not Supported")
    return value


def nvmlInit(): return None
def nvmlShutdown(): return None
def nvmlSystemGetDriverVersion(): return "550.90.07"
def nvmlSystemGetCudaDriverVersion(): return 12040
def nvmlDeviceGetCount(): return len(GPUS)
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return _gpu(h)["name"]
def nvmlDeviceGetUUID(h): return _gpu(h)["uuid"]
def nvmlDeviceGetPciInfo(h): return SimpleNamespace(busId=_gpu(h)["bus"])
def nvmlDeviceGetMemoryInfo(h): return SimpleNamespace(total=80 << 30, free=0, used=0)
def nvmlDeviceGetPersistenceMode(h): return _gpu(h)["persistence"]
def nvmlDeviceGetEccMode(h): return list(_gpu(h)["ecc"])
def nvmlDeviceGetTotalEccErrors(h, error_type, counter_type):
    gpu = _gpu(h)
    if error_type == 0:
        return gpu["corrected"]
    return gpu["unc_volatile"] if counter_type == 0 else gpu["unc_aggregate"]
def nvmlDeviceGetComputeMode(h): return _gpu(h)["compute"]
def nvmlDeviceGetMigMode(h): return list(_maybe(_gpu(h)["mig"]))
def nvmlDeviceGetCurrPcieLinkGeneration(h): return _gpu(h)["gen"][0]
def nvmlDeviceGetMaxPcieLinkGeneration(h): return _gpu(h)["gen"][1]
def nvmlDeviceGetCurrPcieLinkWidth(h): return _gpu(h)["width"][0]
def nvmlDeviceGetMaxPcieLinkWidth(h): return _gpu(h)["width"][1]
def nvmlDeviceGetCurrentClocksThrottleReasons(h): return _gpu(h)["throttle"]
def nvmlDeviceGetRetiredPages(h, cause): return list(_gpu(h)["retired"][cause])
def nvmlDeviceGetRetiredPagesPendingStatus(h): return _gpu(h)["retired_pending"]
def nvmlDeviceGetRemappedRows(h): return tuple(_maybe(_gpu(h)["remapped"]))
def nvmlDeviceGetComputeRunningProcesses(h): return _gpu(h)["procs"]
def nvmlDeviceGetTemperature(h, sensor): return _gpu(h)["temp"]
def nvmlDeviceGetTemperatureThreshold(h, kind): return _maybe(_gpu(h)["slowdown"])
def nvmlDeviceGetEnforcedPowerLimit(h): return _gpu(h)["power"][0]
def nvmlDeviceGetPowerManagementDefaultLimit(h): return _gpu(h)["power"][1]
def nvmlDeviceGetMemoryErrorCounter(h, error_type, counter_type, location):
    gpu = _gpu(h)
    return _maybe(gpu["dram"] if location == 2 else (gpu["sram"] or (None, None))[error_type])
def nvmlDeviceValidateInforom(h):
    if not _gpu(h)["inforom"]:
        raise NVMLError_CorruptedInforom("Corrupted infoROM")
def nvmlDeviceGetInforomImageVersion(h): return "G520.0200.00.05"
def nvmlDeviceGetPcieReplayCounter(h): return _maybe(_gpu(h)["replays"])
def nvmlDeviceGetApplicationsClock(h, clock): return _gpu(h)["clocks"][clock // 2]
def nvmlDeviceGetVbiosVersion(h): return _gpu(h)["vbios"]
def nvmlDeviceGetGspFirmwareVersion(h): return _maybe(_gpu(h)["gsp"])
# No nvmlDeviceGetDefaultApplicationsClock: an older binding lacks it; its answers are errors.
class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    _fields_ = [("clusterUuid", ctypes.c_char * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint8)]
def nvmlDeviceGetGpuFabricInfo(h, info):  # fills the struct it is handed by reference
    info._obj.state = _maybe(_gpu(h)["fabric"])
'''


def test_the_child_reads_every_health_answer_through_pynvml(tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    proc = subprocess.run(
        [sys.executable, "-c", probe.NVIDIA_SNIPPET, probe.NVIDIA_MARK],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    entry = {"argv": ["python3"], "rc": 0, "stdout": proc.stdout, "stderr": proc.stderr}
    cap = overlay(raw_capture("cpu-torch-wheel"), commands={"nvidia": entry})

    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts) and driver.version == "550.90.07"
    gpus = parse_gpus(cap)
    assert isinstance(gpus, GpuFacts) and gpus.source == "nvml"
    h100, v100 = gpus.gpus
    assert (h100.name, h100.bus_id, h100.persistence_mode) == (
        "NVIDIA H100 80GB HBM3",  # bytes from an older binding, decoded
        "0000:1b:00.0",
        True,
    )
    assert (h100.ecc_enabled, h100.ecc_corrected_volatile) == (True, 4)
    health = h100.health
    assert (health.compute_mode, health.mig, health.mig_pending) == ("default", False, False)
    assert (health.pcie_gen, health.pcie_gen_max, health.pcie_width) == (5, 5, 16)
    assert health.throttle == ("idle",)
    assert (health.retired_pages, health.retired_pending) == (0, False)
    assert (health.remap_pending, health.remap_failed) == (False, False)
    assert health.fabric_state == "completed"
    assert [(p.pid, p.used_memory) for p in health.processes or ()] == [(4242, 1 << 30)]

    assert (v100.ecc_uncorrected_volatile, v100.ecc_uncorrected_aggregate) == (2, 7)
    assert v100.persistence_mode is False
    old = v100.health
    assert old.compute_mode == "exclusive_process"
    assert (old.pcie_gen, old.pcie_gen_max, old.pcie_width, old.pcie_width_max) == (1, 3, 8, 16)
    assert old.throttle == ("hw_slowdown", "hw_thermal_slowdown")
    assert (old.retired_pages, old.retired_pending) == (3, True)
    # What this GPU does not support is unknown, never "healthy".
    assert (old.mig, old.remap_pending, old.fabric_state) == (None, None, None)

    # Vitals: degrees to slowdown from NVML's threshold, watts from milliwatts, SRAM and DRAM
    # corrected errors by location, the InfoROM's validation, bytes decoded.
    assert (health.temperature, health.slowdown_margin) == (41, 46)
    assert (health.power_limit, health.power_default) == (700.0, 700.0)
    assert (health.ecc_sram_corrected, health.ecc_sram_uncorrected, health.ecc_dram_corrected) == (
        12,
        0,
        3,
    )
    assert (health.inforom_valid, health.inforom_version, health.pcie_replays) == (
        True,
        "G520.0200.00.05",
        3,
    )
    assert (health.vbios, health.firmware, health.app_clock, health.app_mem_clock) == (
        "96.00.99.00.01",
        "550.90.07",
        1980,
        2619,
    )
    # A function the binding lacks is no answer, not a crashed child.
    assert health.app_clock_default is None
    assert (old.temperature, old.slowdown_margin, old.inforom_valid) == (88, None, False)
    assert (old.power_limit, old.power_default, old.ecc_sram_corrected, old.firmware) == (
        250.0,
        300.0,
        None,
        None,
    )
    assert old.processes == ()
