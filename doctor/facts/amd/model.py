"""The AMD facts' shapes, whichever source filled them: sysfs (doctor/facts/amd/sysfs.py) or pasted
tool output (doctor/facts/amd/text_output.py)."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.model import Missing
from doctor.facts.amd.amdsmi import AmdSmi


@dataclass(frozen=True)
class RasCount:
    block: str  # umc (HBM), gfx, sdma, xgmi_wafl, mmhub, ...
    uncorrectable: int
    correctable: int


@dataclass(frozen=True)
class AmdGpu:
    card: str  # "card1": DRM card numbers skip the BMC's display, so they are not indices
    bus_id: str  # sysfs form, "0000:c1:00.0"
    device_id: str | None  # PCI device id, "0x74a1" (MI300X)
    product: str | None
    numa_node: int | None  # -1 when the firmware gives none
    link_width: int | None
    link_width_max: int | None
    link_gen: int | None
    link_gen_max: int | None
    unique_id: str | None
    serial: str | None
    vbios: str | None
    vram_total: int | None  # bytes
    ras: tuple[RasCount, ...] | None  # None: no RAS interface (RAS off, or a consumer card)
    bad_pages: int | None  # retired VRAM pages
    bad_pages_pending: int | None  # pages waiting for a GPU reset to be retired
    bad_pages_failed: int | None  # pages that could not be retired
    kfd_node: int | None  # the KFD topology node (HIP's view), None when KFD is absent
    gpu_id: int | None  # KFD's gpu_id: names vram_<gpu_id> in /sys/class/kfd/kfd/proc
    firmware: tuple[tuple[str, str], ...] = ()  # (block, version) from device/fw_version
    xgmi_hive: str | None = None  # xgmi_hive_info/xgmi_hive_id: the same on every GPU of a hive
    # The hottest sensor's degrees now and before its critical limit (hwmon temp*_input/_crit:
    # junction where labelled so), None where hwmon shows no limit.
    temperature: int | None = None
    temperature_margin: int | None = None

    @property
    def xgmi_errors(self) -> int | None:
        """Uncorrectable errors the XGMI links counted (RAS block xgmi_wafl), None without RAS;
        corrected ones are the link doing its job."""
        blocks = [r for r in self.ras or () if r.block == "xgmi_wafl"]
        return sum(r.uncorrectable for r in blocks) if blocks else None

    @property
    def ecc_uncorrectable(self) -> int | None:
        return None if self.ras is None else sum(r.uncorrectable for r in self.ras)

    @property
    def ecc_correctable(self) -> int | None:
        return None if self.ras is None else sum(r.correctable for r in self.ras)


@dataclass(frozen=True)
class KfdLink:
    """One direction of a KFD link: from a GPU to a GPU or a CPU (NUMA node)."""

    src: str  # a GPU's bus id, or "cpu<N>" for a CPU node
    dst: str
    type: str  # "XGMI", "PCIe", or "type <n>"
    weight: int | None
    hops: int | None  # XGMI hops (weight / 15); None for PCIe, which KFD does not count
    direct: bool  # io_links (a physical link) rather than p2p_links (a route KFD computed)


@dataclass(frozen=True)
class KfdProcess:
    pid: int
    name: str | None
    vram: tuple[tuple[str, int], ...]  # (GPU bus id, bytes) for every GPU it holds memory on


@dataclass(frozen=True)
class AmdFacts:
    gpus: tuple[AmdGpu, ...]
    links: tuple[KfdLink, ...]
    processes: tuple[KfdProcess, ...] | Missing
    amdgpu_version: str | Missing  # /sys/module/amdgpu/version: the DKMS driver ("6.8.5")
    rocm_version: str | Missing  # $ROCM_PATH/.info/version, else /opt/rocm's
    rocm_installs: tuple[str, ...]  # /opt/rocm-<version> folders side by side
    numa_balancing: bool | None
    cmdline: str | None
    hyperv: bool  # RCCL does not ask for iommu=pt under Hyper-V
    # Where RCCL finds amdkfd peer memory; None where it does not, Missing where not looked at.
    peer_memory: str | Missing | None
    dmabuf_kernel: tuple[str, ...] | Missing  # DMABUF_CONFIG options set =y in the kernel
    smi: AmdSmi | Missing  # the amdsmi bindings' answers, where they could be loaded

    def gpu(self, bus_id: str) -> AmdGpu | None:
        return next((g for g in self.gpus if g.bus_id == bus_id), None)

    def pair_links(self) -> dict[frozenset[str], KfdLink]:
        """The best GPU-GPU link per unordered pair (direct over routed, XGMI over PCIe)."""
        gpus = {g.bus_id for g in self.gpus}
        best: dict[frozenset[str], KfdLink] = {}
        for link in self.links:
            if link.src not in gpus or link.dst not in gpus or link.src == link.dst:
                continue
            key = frozenset((link.src, link.dst))
            old = best.get(key)
            if old is None or _rank(link) < _rank(old):
                best[key] = link
        return best


def _rank(link: KfdLink) -> tuple[int, int, int]:
    return (link.type != "XGMI", not link.direct, link.hops or 0)
