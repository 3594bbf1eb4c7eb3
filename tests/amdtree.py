"""A written AMD node for the probe to read: amdgpu sysfs, the KFD topology, ROCm's version file.

WRITTEN, NOT CAPTURED (no AMD GPU here). The layout and every file's format come from the Linux
kernel's amdgpu/amdkfd sources and docs (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c for
``ras/*_err_count`` and ``gpu_vram_bad_pages``; amdgpu_pm.c / the amdgpu sysfs docs for the
card attributes; amdkfd/kfd_topology.c and kfd_crat.h for ``topology/nodes/N/properties`` and
``io_links/M/properties``, type 2 = PCIe, 11 = XGMI, weight 20 and 15 per XGMI hop), from
RCCL's src/init.cc and src/transport/net_ib.cc (develop, 2024-10) for the host files it reads,
and ROCm's install docs for ``/opt/rocm/.info/version``. Values (bus numbers, serials, versions)
are invented to be plausible for an 8-GPU MI300X node: two sockets, the GPUs in one XGMI hive.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

BUSES = (0x05, 0x15, 0x25, 0x35, 0x85, 0x95, 0xA5, 0xB5)


@dataclass
class AmdNode:
    gpus: int = 8
    rocm: str = "6.2.1-112"
    amdgpu: str = "6.8.5"
    missing_xgmi: tuple[tuple[int, int], ...] = ()  # GPU pairs whose XGMI link is down
    narrow: dict[int, int] = field(default_factory=dict)  # GPU index → current link width
    ras_ue: dict[int, int] = field(default_factory=dict)  # GPU index → umc uncorrectable count
    pending_pages: dict[int, int] = field(default_factory=dict)  # GPU index → pending pages
    numa_balancing: str = "0"
    cmdline: str = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro amd_iommu=on iommu=pt"
    peer_memory: bool = True
    processes: dict[int, tuple[str, int]] = field(default_factory=dict)  # pid → (comm, GPU)
    sos_firmware: str = "0x00380005"  # the PSP's, as amdgpu's fw_version file prints it
    kfd: bool = True  # False: no /sys/class/kfd (a container that hides it)
    hca: bool = False  # one RoCE HCA port (mlx5_0), its GIDs as the kernel lists them
    dmabuf_config: bool = False  # /boot/config-<release> sets RCCL's two DMA-BUF options
    junction: dict[int, int] = field(default_factory=dict)  # GPU index → junction °C (else 45)
    xgmi_ue: dict[int, int] = field(default_factory=dict)  # GPU index → xgmi_wafl uncorrectable


def bdf(index: int) -> str:
    return f"0000:{BUSES[index]:02x}:00.0"


def _pci_device(root: Path, index: int, vendor: str, device: str, klass: str, driver: str) -> Path:
    """A PCI function behind its own switch (root port, upstream, downstream port), linked from
    /sys/bus/pci/devices like the kernel does; index 8 is the NIC, on GPU0's switch."""
    bus = BUSES[index] if index < len(BUSES) else BUSES[0] + 1
    home = BUSES[min(index, len(BUSES) - 1) if index < len(BUSES) else 0]
    rc = "00" if home < 0x80 else "80"
    port = f"0000:{rc}:{home % 0x80 // 0x10 + 1:02x}.1"
    down = f"0000:{home - 1:02x}:{0 if index < len(BUSES) else 1:02x}.0"
    chain = [f"pci0000:{rc}", port, f"0000:{home - 2:02x}:00.0", down, f"0000:{bus:02x}:00.0"]
    folder = root / "sys/devices" / "/".join(chain)
    folder.mkdir(parents=True, exist_ok=True)
    numa = "0" if rc == "00" else "1"
    attrs = {"vendor": vendor, "device": device, "class": klass, "numa_node": numa}
    attrs["local_cpulist"] = "0-95" if numa == "0" else "96-191"
    for name, text in attrs.items():
        (folder / name).write_text(text + "\n")
    (folder / "driver").symlink_to(f"../../../../../../bus/pci/drivers/{driver}")
    listing = root / "sys/bus/pci/devices"
    listing.mkdir(parents=True, exist_ok=True)
    (listing / chain[-1]).symlink_to(os.path.relpath(folder, listing))
    return folder


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _props(**values: object) -> str:
    return "".join(f"{k} {v}\n" for k, v in values.items())


def write_amd_node(root: Path, node: AmdNode) -> None:
    """Lay the node's files under ``root`` (the probe's spec "root")."""
    _write(root, "/sys/module/amdgpu/version", node.amdgpu + "\n")
    _write(root, "/opt/rocm/.info/version", node.rocm + "\n")
    (root / "opt" / f"rocm-{node.rocm.split('-')[0]}").mkdir(parents=True, exist_ok=True)
    _write(root, "/proc/sys/kernel/numa_balancing", node.numa_balancing + "\n")
    _write(root, "/proc/cmdline", node.cmdline + "\n")
    _write(root, "/sys/devices/virtual/dmi/id/bios_version", "1.8\n")
    if node.peer_memory:
        _write(root, "/sys/kernel/mm/memory_peers/amdkfd/version", "1.0\n")
    _write(root, "/proc/kallsyms", "0000000000000000 T amdgpu_driver_load_kms\n")
    # The BMC's display controller is card0 (ASPEED, not AMD's): it must not count as a GPU.
    _write(root, "/sys/class/drm/card0/device/vendor", "0x1a03\n")
    (root / "sys/class/drm/card0-VGA-1").mkdir(parents=True, exist_ok=True)
    kfd = "/sys/class/kfd/kfd/topology/nodes"

    def kfd_write(root: Path, path: str, text: str) -> None:
        if node.kfd:
            _write(root, path, text)

    for cpu in (0, 1):
        kfd_write(root, f"{kfd}/{cpu}/properties", _props(cpu_cores_count=96, simd_count=0))
        kfd_write(root, f"{kfd}/{cpu}/gpu_id", "0\n")
    for i in range(node.gpus):
        card = f"/sys/class/drm/card{i + 1}"
        pci = _pci_device(root, i, "0x1002", "0x74a1", "0x120000", "amdgpu")
        folder = root / card.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(pci, folder), folder / "device")
        dev = card + "/device"
        width = node.narrow.get(i, 16)
        attrs = {
            "current_link_width": str(width),
            "max_link_width": "16",
            "current_link_speed": "32.0 GT/s PCIe",
            "max_link_speed": "32.0 GT/s PCIe",
            "unique_id": f"{0x5A1F00 + i:016x}",
            "serial_number": f"PX{i:014d}",
            "product_name": "AMD Instinct MI300X",
            "vbios_version": "113-M3000100-102",
            "mem_info_vram_total": str(192 << 30),
            "ras/features": "feature mask: 0x3fff\n",
            "fw_version/sos_fw_version": node.sos_firmware,
            "fw_version/smc_fw_version": "0x00557a00",
            "xgmi_hive_info/xgmi_hive_id": "5217049339851234",
            "ras/umc_err_count": f"ue: {node.ras_ue.get(i, 0)}\nce: 0\n",
            "ras/gfx_err_count": "ue: 0\nce: 0\n",
            "ras/xgmi_wafl_err_count": f"ue: {node.xgmi_ue.get(i, 0)}\nce: 2\n",
            # hwmon in millidegrees (Documentation/gpu/amdgpu/thermal.rst): edge, junction, mem.
            "hwmon/hwmon3/temp1_label": "edge",
            "hwmon/hwmon3/temp1_input": "40000",
            "hwmon/hwmon3/temp1_crit": "100000",
            "hwmon/hwmon3/temp2_label": "junction",
            "hwmon/hwmon3/temp2_input": str(node.junction.get(i, 45) * 1000),
            "hwmon/hwmon3/temp2_crit": "110000",
            "hwmon/hwmon3/temp3_label": "mem",
            "hwmon/hwmon3/temp3_input": "50000",
            "hwmon/hwmon3/temp3_crit": "95000",
            "ras/gpu_vram_bad_pages": "".join(
                f"0x{0x1000 + n:08x} : 0x00001000 : P\n"
                for n in range(node.pending_pages.get(i, 0))
            ),
        }
        for name, text in attrs.items():
            _write(root, f"{dev}/{name}", text if text.endswith("\n") else text + "\n")
        number, gpu_id = i + 2, 1000 + i
        kfd_write(root, f"{kfd}/{number}/gpu_id", f"{gpu_id}\n")
        kfd_write(root, f"{kfd}/{number}/name", "gfx942\n")
        props = _props(
            cpu_cores_count=0,
            simd_count=1216,
            vendor_id=4098,
            device_id=29857,
            location_id=BUSES[i] << 8,
            domain=0,
            drm_render_minor=128 + i,
            unique_id=0x5A1F00 + i,
        )
        kfd_write(root, f"{kfd}/{number}/properties", props)
        links = [(0 if i < 4 else 1, 2, 20)]
        for j in range(node.gpus):
            if j != i and tuple(sorted((i, j))) not in node.missing_xgmi:
                links.append((j + 2, 11, 15))
        for m, (to, kind, weight) in enumerate(links):
            kfd_write(
                root,
                f"{kfd}/{number}/io_links/{m}/properties",
                _props(
                    type=kind,
                    version_major=0,
                    version_minor=0,
                    node_from=number,
                    node_to=to,
                    weight=weight,
                    min_latency=0,
                    max_latency=0,
                    min_bandwidth=0,
                    max_bandwidth=0,
                    recommended_transfer_size=0,
                    flags=1,
                ),
            )
    if node.hca:
        _write_hca(root)
    if node.dmabuf_config:
        config = "CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\n"
        _write(root, f"/boot/config-{platform.release()}", config)
    if node.kfd:
        (root / "sys/class/kfd/kfd/proc").mkdir(parents=True, exist_ok=True)
    for pid, (comm, gpu) in node.processes.items():
        for i in range(node.gpus):
            used = 8 << 30 if i == gpu else 0
            _write(root, f"/sys/class/kfd/kfd/proc/{pid}/vram_{1000 + i}", f"{used}\n")
        _write(root, f"/proc/{pid}/comm", comm + "\n")


def _write_hca(root: Path) -> None:
    """mlx5_0 port 1, RoCE on ens1np0 with 10.0.0.1: the four GIDs the kernel adds (RoCE v1 and
    v2 for the link-local address, then for the IPv4-mapped one; ib_core's gid_attrs/types)."""
    pci = _pci_device(root, len(BUSES), "0x15b3", "0x1021", "0x020000", "mlx5_core")
    hca = root / "sys/class/infiniband/mlx5_0"
    hca.mkdir(parents=True, exist_ok=True)
    (hca / "device").symlink_to(os.path.relpath(pci, hca))
    (pci / "net/ens1np0").mkdir(parents=True)
    port = "/sys/class/infiniband/mlx5_0/ports/1"
    for name, text in {
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": "400 Gb/sec (4X NDR)",
        "link_layer": "Ethernet",
    }.items():
        _write(root, f"{port}/{name}", text + "\n")
    gids = (
        ("fe80:0000:0000:0000:0a0b:0cff:fe0d:0e0f", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:0a0b:0cff:fe0d:0e0f", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
    )
    for index, (gid, kind) in enumerate(gids):
        _write(root, f"{port}/gids/{index}", gid + "\n")
        _write(root, f"{port}/gid_attrs/types/{index}", kind + "\n")
        _write(root, f"{port}/gid_attrs/ndevs/{index}", "ens1np0\n")
    _write(root, "/sys/class/infiniband/mlx5_0/node_type", "1: CA\n")
