"""Every GPU of a node, whoever made it: NVIDIA's (NVML, nvidia-smi) and AMD's (amdgpu sysfs).

A GPU is a GPU for the checks that judge count, PCI address, NUMA node, PCIe link, ECC and
processes; what only one vendor has stays in its own facts (doctor/facts/amd/sysfs.py).
"""

from __future__ import annotations

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd.amdsmi import SmiGpu
from doctor.facts.amd.model import AmdFacts, AmdGpu
from doctor.facts.amd.sysfs import parse_amd
from doctor.facts.gpu import Gpu, GpuFacts, GpuHealth, GpuProcess
from doctor.facts.nvidia.gpus import parse_gpus as parse_nvidia_gpus


def _processes(amd: AmdFacts, gpu: AmdGpu, smi: SmiGpu | None) -> tuple[GpuProcess, ...] | None:
    if not isinstance(amd.processes, Missing):  # KFD's own list: no library needed
        return tuple(
            GpuProcess(p.pid, p.name or "?", used)
            for p in amd.processes
            for bus, used in p.vram
            if bus == gpu.bus_id
        )
    if smi is not None and smi.processes is not None:
        return tuple(GpuProcess(pid, name, used) for pid, name, used in smi.processes)
    return None


def amd_gpu(amd: AmdFacts, gpu: AmdGpu, index: int) -> Gpu:
    """One AMD GPU in the shared shape; amdsmi's counts where sysfs has none."""
    smi = (
        None
        if isinstance(amd.smi, Missing)
        else next((g for g in amd.smi.gpus if g.bus_id == gpu.bus_id), None)
    )
    ue, ce = gpu.ecc_uncorrectable, gpu.ecc_correctable
    pages, pending = gpu.bad_pages, gpu.bad_pages_pending
    if smi is not None:
        ue = smi.ecc_uncorrectable if ue is None else ue
        ce = smi.ecc_correctable if ce is None else ce
        pages = smi.bad_pages if pages is None else pages
        pending = smi.bad_pages_pending if pending is None else pending
    health = GpuHealth(
        pcie_gen=gpu.link_gen,
        pcie_gen_max=gpu.link_gen_max,
        pcie_width=gpu.link_width,
        pcie_width_max=gpu.link_width_max,
        retired_pages=pages,
        retired_pending=None if pending is None else pending > 0,
        processes=_processes(amd, gpu, smi),
        temperature=gpu.temperature,
        slowdown_margin=gpu.temperature_margin,
        vbios=gpu.vbios,
        link_errors=gpu.xgmi_errors,
    )
    return Gpu(
        index=index,  # HIP orders GPUs by PCI address, as listed here
        name=gpu.product or f"AMD GPU {gpu.device_id or '?'}",
        bus_id=gpu.bus_id,
        uuid=gpu.unique_id,
        memory_total=gpu.vram_total,
        persistence_mode=None,
        ecc_enabled=None if gpu.ras is None else True,
        ecc_uncorrected_volatile=ue,  # RAS counts since the driver loaded
        ecc_uncorrected_aggregate=None,
        ecc_corrected_volatile=ce,
        health=health,
        vendor="amd",
    )


def parse_gpus(cap: Capture) -> GpuFacts | Missing:
    nvidia = parse_nvidia_gpus(cap)
    amd = parse_amd(cap)
    if isinstance(amd, Missing) or not amd.gpus:
        return nvidia
    gpus = tuple(amd_gpu(amd, g, i) for i, g in enumerate(amd.gpus))
    if isinstance(nvidia, Missing) or not nvidia.gpus:
        return GpuFacts(gpus, "amdgpu")
    return GpuFacts(nvidia.gpus + gpus, nvidia.source)  # both vendors in one node: both listed
