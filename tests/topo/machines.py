"""NVML answers for the machines the sysfs tree fixtures describe, through the fake pynvml (MOCK).

Each builder states the machine as NVML would describe it, from the documented API shapes and
the published NVLink arrangement of that class of machine; nothing here was captured.
"""

from __future__ import annotations

from typing import Any

from doctor.core.model import Missing
from doctor.facts.system import parse_cpu_list
from tests.topo.fake_pynvml import GPU_TYPE, SWITCH, Gpu, Link, fake_module, nvml_answers

HGX_GPU_BUSES = (0x1B, 0x2D, 0x3F, 0x51, 0x9D, 0xAE, 0xBF, 0xD0)
HGX_NVSWITCH_BUSES = (0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8)
HGX_CPUS = ("0-55,112-167", "56-111,168-223")
PCIE_GPU_BUSES = (0x1A, 0x1B, 0xB3, 0xB4)
PCIE_CPUS = ("0-31,64-95", "32-63,96-127")


def words(members: str) -> list[int]:
    """A cpulist as NVML's affinity array of 64-bit words."""
    out = [0] * 16
    cpus = parse_cpu_list(members)
    assert not isinstance(cpus, Missing), members
    for n in cpus:
        out[n // 64] |= 1 << (n % 64)
    return out


def nvml_bus(bus: int) -> str:
    return f"00000000:{bus:02X}:00.0"


def _sockets(count: int, per_socket: int) -> dict[tuple[int, int], int]:
    # NODE (40) within a socket, SYS (50) across: what NVML answers for GPUs on separate host
    # bridges, as on these boards.
    return {
        (a, b): 40 if a // per_socket == b // per_socket else 50
        for a in range(count)
        for b in range(a + 1, count)
    }


def hgx_h100(
    down: dict[int, int] | None = None,
    errors: dict[tuple[int, int], tuple[int, int, int, int] | None] | None = None,
) -> dict[str, Any]:
    """HGX H100: 18 NVLinks per GPU, all to NVSwitches that are not on PCI (remote type only).

    ``down`` maps a GPU index to how many of its links are not active; ``errors`` maps (GPU,
    link) to its error counters (replay, recovery, CRC flit, CRC data), None for NotSupported.
    """
    gpus = []
    for i, bus in enumerate(HGX_GPU_BUSES):
        off = (down or {}).get(i, 0)
        links = [
            Link("00000000:FF:FF.F", up=n >= off, errors=(errors or {}).get((i, n), (0, 0, 0, 0)))
            for n in range(18)
        ]
        cpus = HGX_CPUS[i // 4]
        gpus.append(Gpu(nvml_bus(bus), words(cpus), [1 << (i // 4)], links))
    return nvml_answers(fake_module(gpus, _sockets(8, 4)))


def dgx_a100() -> dict[str, Any]:
    """DGX A100: 12 NVLinks per GPU, two to each of six PCI-visible NVSwitches; older bindings
    without nvmlDeviceGetNvLinkRemoteDeviceType, so only the PCI class marks the switches."""
    gpus = []
    for i, bus in enumerate(HGX_GPU_BUSES):
        links = [Link(nvml_bus(HGX_NVSWITCH_BUSES[n % 6]), remote_type=SWITCH) for n in range(12)]
        gpus.append(
            Gpu(nvml_bus(bus), words(HGX_CPUS[i // 4]), [1 << (i // 4)], links, "NVIDIA A100")
        )
    return nvml_answers(fake_module(gpus, _sockets(8, 4), remote_type_call=False))


def pcie_4gpu(bridged: bool, p2p: dict[tuple[int, int], int]) -> dict[str, Any]:
    """Dual-socket PCIe server: 4 GPUs, two per switch; ``bridged`` adds a 4-link NVLink bridge
    between the GPUs of each pair (direct GPU-to-GPU links)."""
    gpus = []
    for i, bus in enumerate(PCIE_GPU_BUSES):
        peer = PCIE_GPU_BUSES[i ^ 1]
        links = [Link(nvml_bus(peer), remote_type=GPU_TYPE) for _ in range(4)] if bridged else []
        gpus.append(
            Gpu(nvml_bus(bus), words(PCIE_CPUS[i // 2]), [1 << (i // 2)], links, "NVIDIA A100 PCIe")
        )
    ancestor = {(0, 1): 10, (2, 3): 10, **{(a, b): 50 for a in (0, 1) for b in (2, 3)}}
    return nvml_answers(fake_module(gpus, ancestor, p2p))
