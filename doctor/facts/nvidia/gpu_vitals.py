"""A GPU's vitals beyond its health flags: temperature and the margin to slowdown, the power cap,
correctable ECC by kind, InfoROM, PCIe replays, applications clocks, VBIOS and GSP firmware.

Read from NVML (the probe's child) and from the `nvidia-smi -q` tree, text or XML, in each
layout nvidia-smi(1) documents: R535+ prints temperatures against T.Limit ("GPU T.Limit Temp:
55 C", the degrees left to the GPU's maximum operating temperature, and "GPU Slowdown T.Limit
Temp: -2 C", where slowdown starts on that scale), older drivers absolute ones ("GPU Slowdown
Temp: 89 C" beside "GPU Current Temp"). A value nvidia-smi shows as N/A is None, never 0.
`nvidia-smi` prints "WARNING: infoROM is corrupted at gpu 0000:04:00.0" before any report (exit
code 14): a pasted warning marks that GPU's InfoROM invalid.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.core.capture import Capture, CommandResult
from doctor.facts.gpu import sysfs_bus_id
from doctor.facts.nvidia.smi_tree import Entry

WARNING_SLOT = "nvidia-smi:warning"  # a pasted warning line lands in "nvidia-smi:warning:<crc>"
INFOROM_CORRUPT = re.compile(
    r"infoROM is corrupted at gpu\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])",
    re.IGNORECASE,
)
_SIGNED = re.compile(r"^\s*(-?\d+)(?:\.\d+)?\s*(?:C|MHz|W)?\s*$")
_FLOAT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*W?\s*$")


def signed(value: Any) -> int | None:
    """'-2 C' → -2, '1980 MHz' → 1980; 'N/A' and anything else → None."""
    m = _SIGNED.match(value) if isinstance(value, str) else None
    return int(m.group(1)) if m else None


def watts(value: Any) -> float | None:
    m = _FLOAT.match(value) if isinstance(value, str) else None
    return float(m.group(1)) if m else None


def _first(gpu: Entry, *paths: tuple[str, ...]) -> str | None:
    for path in paths:
        value = gpu.text(*path)
        if value is not None and value.strip().upper() not in ("N/A", "[N/A]"):
            return value
    return None


def margins(gpu: Entry) -> tuple[int | None, int | None, int | None]:
    """(GPU temperature, degrees to slowdown, memory degrees to its limit) from -q."""
    temp = signed(_first(gpu, ("temperature", "gpu_current_temp"), ("temperature", "gpu_temp")))
    tlimit = signed(
        _first(gpu, ("temperature", "gpu_t_limit_temp"), ("temperature", "gpu_temp_tlimit"))
    )
    slow_tlimit = signed(
        _first(
            gpu,
            ("temperature", "gpu_slowdown_t_limit_temp"),
            ("temperature", "gpu_temp_slow_tlimit_threshold"),
        )
    )
    slowdown = signed(
        _first(
            gpu, ("temperature", "gpu_slowdown_temp"), ("temperature", "gpu_temp_slow_threshold")
        )
    )
    margin = None
    if tlimit is not None:
        # T.Limit counts down to the maximum operating temperature; slowdown sits at
        # slow_tlimit on the same scale (-2: two degrees past it).
        margin = tlimit - slow_tlimit if slow_tlimit is not None else tlimit
    elif slowdown is not None and temp is not None:
        margin = slowdown - temp
    mem = signed(
        _first(gpu, ("temperature", "memory_current_temp"), ("temperature", "memory_temp"))
    )
    mem_max = signed(
        _first(
            gpu,
            ("temperature", "memory_max_operating_temp"),
            ("temperature", "gpu_temp_max_mem_threshold"),
        )
    )
    return temp, margin, (mem_max - mem if mem is not None and mem_max is not None else None)


def _ecc_kinds(gpu: Entry) -> dict[str, Any]:
    """Corrected SRAM/DRAM and uncorrected SRAM over the GPU's life, where -q splits them."""
    life = gpu.get("ecc_errors", "aggregate")
    if life is None:
        return {}
    single = life.get("single_bit")
    if single is not None:
        # Before R470: "Single Bit" corrected counts by place; device memory is the DRAM, the
        # register file and caches are on-chip SRAM.
        dram, total = signed(single.text("device_memory")), signed(single.text("total"))
        return {
            "ecc_dram_corrected": dram,
            "ecc_sram_corrected": total - dram if total is not None and dram is not None else None,
        }
    sram_unc = [
        signed(e.value)
        for key, e in life.children
        if key.startswith("sram_uncorrectable") and not e.children
    ]
    known = [v for v in sram_unc if v is not None]
    exceeded = life.text("sram_threshold_exceeded")
    return {
        "ecc_sram_corrected": signed(life.text("sram_correctable")),
        "ecc_dram_corrected": signed(life.text("dram_correctable")),
        "ecc_sram_uncorrected": sum(known) if known else None,
        "sram_threshold_exceeded": {"yes": True, "no": False}.get((exceeded or "").lower()),
    }


def vitals_from_tree(gpu: Entry) -> dict[str, Any]:
    """The GpuHealth vitals of one ``gpu`` entry of the -q tree (text or XML)."""
    temp, margin, mem_margin = margins(gpu)
    power = gpu.get("gpu_power_readings") or gpu.get("power_readings")
    limit = None
    if power is not None:
        limit = watts(
            _first(power, ("current_power_limit",), ("enforced_power_limit",), ("power_limit",))
        )
    app, default = gpu.get("applications_clocks"), gpu.get("default_applications_clocks")

    def clock(entry: Entry | None, *names: str) -> int | None:
        return signed(_first(entry, *((n,) for n in names))) if entry is not None else None

    return {
        "temperature": temp,
        "slowdown_margin": margin,
        "memory_margin": mem_margin,
        "power_limit": limit,
        "power_default": watts(power.text("default_power_limit")) if power else None,
        **_ecc_kinds(gpu),
        "pcie_replays": signed(
            _first(gpu, ("pci", "replays_since_reset"), ("pci", "replay_counter"))
        ),
        "inforom_version": _first(
            gpu, ("inforom_version", "image_version"), ("inforom_version", "img_version")
        ),
        "app_clock": clock(app, "graphics", "graphics_clock"),
        "app_clock_default": clock(default, "graphics", "graphics_clock"),
        "app_mem_clock": clock(app, "memory", "mem_clock"),
        "app_mem_clock_default": clock(default, "memory", "mem_clock"),
        "vbios": _first(gpu, ("vbios_version",)),
        "firmware": _first(gpu, ("gsp_firmware_version",)),
    }


def _value(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, dict) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def vitals_from_nvml(device: dict[str, Any]) -> dict[str, Any]:
    """The probe child's vitals answers for one device (each {"value": v} or {"error": e})."""
    temp = _int(_value(device.get("temperature")))
    slowdown = _int(_value(device.get("temp_slowdown")))
    inforom = device.get("inforom_valid")
    milliwatts = {k: _int(_value(device.get(k))) for k in ("power_limit", "power_default")}
    return {
        "temperature": temp,
        "slowdown_margin": slowdown - temp if slowdown and temp is not None else None,
        "power_limit": milliwatts["power_limit"] / 1000 if milliwatts["power_limit"] else None,
        "power_default": milliwatts["power_default"] / 1000
        if milliwatts["power_default"]
        else None,
        "ecc_sram_corrected": _int(_value(device.get("ecc_sram_corrected"))),
        "ecc_dram_corrected": _int(_value(device.get("ecc_dram_corrected"))),
        "ecc_sram_uncorrected": _int(_value(device.get("ecc_sram_uncorrected"))),
        # nvmlDeviceValidateInforom returns nothing when valid and raises otherwise: only the
        # corruption error means invalid (NotSupported on a GPU without InfoROM is no answer).
        "inforom_valid": True
        if isinstance(inforom, dict) and "value" in inforom
        else (False if "Corrupted" in str(inforom) else None),
        "inforom_version": _text(_value(device.get("inforom_version"))),
        "pcie_replays": _int(_value(device.get("pcie_replays"))),
        "app_clock": _int(_value(device.get("app_clock"))),
        "app_clock_default": _int(_value(device.get("app_clock_default"))),
        "app_mem_clock": _int(_value(device.get("app_mem_clock"))),
        "app_mem_clock_default": _int(_value(device.get("app_mem_clock_default"))),
        "vbios": _text(_value(device.get("vbios"))),
        "firmware": _text(_value(device.get("gsp_firmware"))),
    }


def corrupt_inforoms(cap: Capture) -> set[str]:
    """The GPUs (sysfs bus ids) nvidia-smi warned have a corrupted InfoROM, in any pasted or
    captured nvidia-smi output."""
    texts = []
    for name in cap.raw.get("commands", {}):
        if name.startswith(("nvidia-smi", WARNING_SLOT)):
            result = cap.command(name)
            if isinstance(result, CommandResult):
                texts += [result.stdout[: 1 << 20], result.stderr[: 1 << 16]]
    return {sysfs_bus_id(m["bus"]) for text in texts for m in INFOROM_CORRUPT.finditer(text)}
