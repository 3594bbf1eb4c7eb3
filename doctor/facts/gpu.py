"""A GPU, whoever made it: the shape every vendor's reader fills (doctor/facts/nvidia/,
doctor/facts/amd/) and the checks judge: count, PCI address, memory, ECC, PCIe link, clocks,
processes. A vendor's modules import this one and their own folder, never another vendor's;
what only one vendor has stays in its own facts. doctor/facts/gpu_vendors.py lists every
vendor's GPUs of a node in this shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    name: str
    used_memory: int | None  # bytes


@dataclass(frozen=True)
class GpuHealth:
    compute_mode: str | None = None  # default, exclusive_process, exclusive_thread, prohibited
    mig: bool | None = None  # MIG mode now
    mig_pending: bool | None = None  # MIG mode after the next GPU reset
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None  # the most this GPU and this slot can do
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    throttle: tuple[str, ...] | None = None  # active clock-event reasons, NVML's names
    retired_pages: int | None = None  # pages retired for ECC errors (pre-Ampere)
    retired_pending: bool | None = None  # a retirement waits for the next driver reload
    remap_pending: bool | None = None  # a row remap waits for the next GPU reset (Ampere+)
    remap_failed: bool | None = None  # a remap failed: the GPU needs servicing
    processes: tuple[GpuProcess, ...] | None = None
    fabric_state: str | None = None  # NVSwitch / multi-node NVLink fabric state
    # Vitals (doctor/facts/nvidia/gpu_vitals.py, doctor/facts/amd/): None where not reported.
    temperature: int | None = None  # °C now
    slowdown_margin: int | None = None  # °C left before the GPU slows itself down for heat
    memory_margin: int | None = None  # °C left before the memory's own limit
    power_limit: float | None = None  # W, the cap enforced now
    power_default: float | None = None  # W, the cap the board ships with
    ecc_sram_corrected: int | None = None  # over the GPU's life (aggregate)
    ecc_dram_corrected: int | None = None
    ecc_sram_uncorrected: int | None = None
    sram_threshold_exceeded: bool | None = None  # the driver's own SRAM error threshold
    inforom_valid: bool | None = None
    inforom_version: str | None = None
    pcie_replays: int | None = None  # PCIe replays since the GPU was reset
    app_clock: int | None = None  # MHz, the graphics applications clock set now
    app_clock_default: int | None = None
    app_mem_clock: int | None = None
    app_mem_clock_default: int | None = None
    vbios: str | None = None
    firmware: str | None = None  # the GPU's own firmware besides the VBIOS (NVIDIA's GSP)
    link_errors: int | None = None  # errors on the GPU-to-GPU links (AMD XGMI)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    bus_id: str  # sysfs form, "0000:07:00.0", to match the PCI facts
    uuid: str | None
    memory_total: int | None  # bytes
    persistence_mode: bool | None
    ecc_enabled: bool | None
    ecc_uncorrected_volatile: int | None  # since the last driver load
    ecc_uncorrected_aggregate: int | None  # over the GPU's life
    ecc_corrected_volatile: int | None
    health: GpuHealth = field(default_factory=GpuHealth)
    vendor: Literal["nvidia", "amd"] = "nvidia"


Source = Literal[
    "nvml", "nvidia-smi", "nvidia-smi -q -x", "nvidia-smi -q", "nvidia-smi table", "amdgpu"
]


@dataclass(frozen=True)
class GpuFacts:
    gpus: tuple[Gpu, ...]
    source: Source


_BDF = re.compile(r"^(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$")


def sysfs_bus_id(bus_id: str) -> str:
    """NVML/nvidia-smi "00000000:07:00.0" → sysfs "0000:07:00.0" (4-digit domain, lower case).

    Text that is not a bus id comes back as it was (stripped), to be shown, never matched.
    """
    text = bus_id.strip().lower()
    m = _BDF.match(text)
    if m is None:
        return text
    domain, bus, device, function = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"
