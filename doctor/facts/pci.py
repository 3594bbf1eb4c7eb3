"""PCI devices from sysfs: identity, driver, NUMA node and the bridge chain above each device."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.capture import Capture
from doctor.model import Missing

ROOT = "/sys/bus/pci/devices"
VENDOR_NVIDIA = 0x10DE
VENDOR_MELLANOX = 0x15B3
CLASS_DISPLAY = 0x03  # base class: 0x0300 VGA, 0x0302 3D controller (data-centre GPUs)
CLASS_NETWORK = 0x02  # 0x0200 Ethernet, 0x0207 InfiniBand
CLASS_BRIDGE = 0x06  # 0x0604 PCI bridge/switch port; NVSwitch reports 0x0680


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

    @property
    def base_class(self) -> int:
        return self.pci_class >> 16

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == VENDOR_NVIDIA and self.base_class == CLASS_DISPLAY


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
            int(numa) if isinstance(numa, str) and numa.strip().lstrip("-").isdigit() else None
        )
        driver = cap.link(f"{base}/driver")
        cpus = cap.file(f"{base}/local_cpulist")
        real = cap.value(f"realpath:{base}")
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
            )
        )
    return devices
