"""PCI devices from sysfs: identity, driver, NUMA node and the bridge chain above each device."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing

ROOT = "/sys/bus/pci/devices"
VENDOR_NVIDIA = 0x10DE
VENDOR_AMD = 0x1002
VENDOR_MELLANOX = 0x15B3
CLASS_DISPLAY = 0x03  # base class: 0x0300 VGA, 0x0302 3D controller (data-centre GPUs)
CLASS_ACCELERATOR = 0x12  # processing accelerators: AMD Instinct MI300 and later
CLASS_NETWORK = 0x02  # 0x0200 Ethernet, 0x0207 InfiniBand
CLASS_BRIDGE = 0x06  # 0x0604 PCI bridge/switch port; NVSwitch reports 0x0680


# PCI Express extended capabilities start at 0x100 of config space (PCIe base spec, 7.6): a
# 32-bit header of ID (bits 0-15), version (16-19) and the next one's offset (20-31). ACS is ID
# 0x000D; its control register is the 16-bit word at +6.
EXTENDED_START = 0x100
ACS_ID = 0x000D
ACS_SOURCE_VALIDATION = 1 << 0
ACS_REQUEST_REDIRECT = 1 << 2  # P2P requests sent up to the root complex
ACS_COMPLETION_REDIRECT = 1 << 3  # P2P completions sent up to the root complex
ACS_BITS = (
    (ACS_SOURCE_VALIDATION, "SrcValid"),
    (1 << 1, "TransBlk"),
    (ACS_REQUEST_REDIRECT, "ReqRedir"),
    (ACS_COMPLETION_REDIRECT, "CmpltRedir"),
    (1 << 4, "UpstreamFwd"),
    (1 << 5, "EgressCtrl"),
    (1 << 6, "DirectTrans"),
)


@dataclass(frozen=True)
class Acs:
    """A bridge's ACS control register, as lspci's ACSCtl line shows it."""

    control: int

    @property
    def redirects(self) -> bool:
        return bool(self.control & (ACS_REQUEST_REDIRECT | ACS_COMPLETION_REDIRECT))

    def __str__(self) -> str:
        return " ".join(name + ("+" if self.control & bit else "-") for bit, name in ACS_BITS)


def parse_acs(config_hex: str) -> Acs | Missing | None:
    """The ACS control of a bridge from its config space (hex); None where it has no ACS
    capability, Missing where the extended space was not readable (it needs root)."""
    try:
        config = bytes.fromhex(config_hex.strip())
    except ValueError:
        return Missing("PCI config space: not hex", "failed")
    if len(config) < EXTENDED_START + 8:
        return Missing("PCI extended config space unreadable (root only)", "unreadable")
    offset, seen = EXTENDED_START, set()
    while EXTENDED_START <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_ID:
            return Acs(int.from_bytes(config[offset + 6 : offset + 8], "little"))
        offset = (header >> 20) & 0xFFC
    return None


@dataclass(frozen=True)
class PciDevice:
    address: str  # 0000:17:00.0
    vendor: int
    device: int
    pci_class: int  # the 24-bit class code, e.g. 0x030200
    driver: str | None  # bound kernel driver, None when unbound
    numa_node: int | None  # None where the kernel reports -1 (no NUMA information)
    local_cpus: str | None
    path: tuple[str, ...]  # bus addresses from the root complex down to this device
    # Bridges only: their ACS control; None without the capability or not captured (older
    # captures), Missing where the config space was not readable.
    acs: Acs | Missing | None = None

    @property
    def base_class(self) -> int:
        return self.pci_class >> 16

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == VENDOR_NVIDIA and self.base_class == CLASS_DISPLAY

    @property
    def is_amd_gpu(self) -> bool:
        return self.vendor == VENDOR_AMD and self.base_class in (CLASS_DISPLAY, CLASS_ACCELERATOR)


def _hex(text: str | Missing) -> int | None:
    if isinstance(text, Missing):
        return None
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def bridge_chain(realpath: str) -> tuple[str, ...]:
    """'/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0' → ('0000:00:01.0', '0000:01:00.0')."""
    return tuple(part for part in realpath.split("/") if part.count(":") == 2 and "." in part)


def parse_pci(cap: Capture) -> list[PciDevice] | Missing:
    listing = cap.dir(ROOT)
    if isinstance(listing, Missing):
        return listing
    devices = []
    for addr in listing:
        base = f"{ROOT}/{addr}"
        vendor, device, pci_class = (
            _hex(cap.file(f"{base}/{a}")) for a in ("vendor", "device", "class")
        )
        if vendor is None or device is None or pci_class is None:
            continue  # a device that vanished or is unreadable mid-probe
        numa = cap.file(f"{base}/numa_node")
        numa_node = (
            int(numa) if isinstance(numa, str) and numa.strip().lstrip("-").isdecimal() else None
        )
        driver = cap.link(f"{base}/driver")
        cpus = cap.file(f"{base}/local_cpulist")
        real = cap.value(f"realpath:{base}")
        config = cap.value(f"pci-config:{base}")
        if isinstance(config, str):
            acs: Acs | Missing | None = parse_acs(config)
        else:
            # Not captured (not a bridge, an older probe): nothing to say; else unknown, and why.
            acs = config if isinstance(config, Missing) and config.kind != "unsupported" else None
        devices.append(
            PciDevice(
                address=addr,
                vendor=vendor,
                device=device,
                pci_class=pci_class,
                driver=driver.rsplit("/", 1)[-1] if isinstance(driver, str) else None,
                numa_node=numa_node if numa_node is not None and numa_node >= 0 else None,
                local_cpus=cpus.strip() if isinstance(cpus, str) else None,
                path=bridge_chain(real) if isinstance(real, str) else (addr,),
                acs=acs,
            )
        )
    return devices
