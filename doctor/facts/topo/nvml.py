"""GPU facts from the probe's raw NVML answers (pynvml's documented calls and constants).

NVLinks are counted the way NCCL counts them (`src/graph/xml.cc` ncclTopoGetXmlFromGpu): a link
counts when it is P2P-capable and active, grouped by the remote PCI bus id; a remote that is an
NVSwitch (PCI class 0x068000, NVML remote type SWITCH, or not visible, as in a VM) puts the GPU on
the switch fabric, where every pair of fabric GPUs is connected with the smaller link count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# nvmlGpuTopologyLevel_t → nvidia-smi label. INTERNAL (two GPUs on one board) sits behind the
# board's own switch, which nvidia-smi shows as PIX.
COMMON_ANCESTOR = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t
P2P_STATUS = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
NVLINK_REMOTE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
NVSWITCH_CLASS = 0x068000  # NCCL's PCI_NVSWITCH_CLASS
INVISIBLE_REMOTE = "ffffffff:ff:ff.f"  # NCCL's "not visible inside this VM" bus id, reduced


class NvmlShapeError(ValueError):
    """The NVML capture does not have the shape the probe writes."""


@dataclass(frozen=True)
class NvmlGpu:
    name: str  # GPU0, in NVML index order (PCI bus order, like nvidia-smi)
    model: str
    bus_id: str  # 0000:18:00.0: lower case, 4-digit domain, as sysfs spells it
    links_up: int  # active, P2P-capable NVLinks
    links_down: int  # NVLinks NVML reports but not active
    peers: dict[str, int]  # remote bus id → active links to it
    cpu_affinity: str
    numa_affinity: str
    numa_id: str
    # Error counters summed over the GPU's links since the driver loaded (replay, recovery,
    # crc_flit, crc_data), each only where NVML answered it for some link.
    link_errors: dict[str, int] = field(default_factory=dict)


def bus_id(text: str) -> str:
    """NVML's '00000000:18:00.0' as sysfs spells it: '0000:18:00.0' (NCCL does the same)."""
    domain, _, rest = text.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else domain


def compact_ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 3, 8] → '0-3,8' (the kernel's cpulist format, which nvidia-smi prints)."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


def bitmask_members(words: Any) -> list[int] | None:
    """NVML affinity masks are arrays of 64-bit words, word 0 holding members 0-63."""
    if not isinstance(words, list) or not all(isinstance(w, int) for w in words):
        return None
    return [64 * i + bit for i, word in enumerate(words) for bit in range(64) if word >> bit & 1]


def _ok(answer: Any) -> bool:
    return not (isinstance(answer, dict) and "error" in answer)


def _gpu(index: int, raw: Any, switches: set[str]) -> NvmlGpu:
    if not isinstance(raw, dict) or not isinstance(raw.get("bus_id"), str):
        raise NvmlShapeError(f"GPU{index}: no PCI bus id in the NVML capture")
    peers: dict[str, int] = {}
    errors: dict[str, int] = {}
    up = down = 0
    links = raw.get("nvlinks")
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict) or not _ok(link.get("state")):
            continue  # no NVLink on this GPU, or the link index is past the last one
        counters = link.get("errors")
        for name, count in counters.items() if isinstance(counters, dict) else []:
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                errors[name] = errors.get(name, 0) + count
        if link.get("state") != 1:  # NVML_FEATURE_ENABLED
            down += 1
            continue
        if link.get("p2p") != 1 or not isinstance(link.get("remote_bus_id"), str):
            continue  # NCCL skips links it cannot use for P2P
        up += 1
        remote = bus_id(link["remote_bus_id"])
        if link.get("remote_type") == NVLINK_REMOTE_SWITCH or remote in switches:
            remote = "nvswitch"
        peers[remote] = peers.get(remote, 0) + 1
    cpus = bitmask_members(raw.get("cpu_affinity"))
    nodes = bitmask_members(raw.get("memory_affinity"))
    numa_id = raw.get("numa_node_id")
    return NvmlGpu(
        name=f"GPU{index}",
        model=raw["name"] if isinstance(raw.get("name"), str) else "?",
        bus_id=bus_id(raw["bus_id"]),
        links_up=up,
        links_down=down,
        peers=peers,
        link_errors=errors,
        cpu_affinity=compact_ranges(cpus) if cpus else "N/A",
        numa_affinity=compact_ranges(nodes) if nodes else "N/A",
        numa_id=str(numa_id) if isinstance(numa_id, int) and numa_id >= 0 else "N/A",
    )


def parse_nvml_gpus(raw: dict[str, Any], visible: set[str], switches: set[str]) -> list[NvmlGpu]:
    """GPUs in NVML order; ``visible`` holds the PCI addresses sysfs shows, ``switches`` NVSwitches.

    A remote bus id that sysfs does not show is an NVSwitch NCCL cannot see (VMs), as NCCL assumes.
    """
    devices = raw.get("devices")
    if not isinstance(devices, list):
        raise NvmlShapeError("no device list in the NVML capture")
    gpus = [_gpu(i, d, switches) for i, d in enumerate(devices)]
    own = {g.bus_id for g in gpus}
    out = []
    for gpu in gpus:
        peers: dict[str, int] = {}
        for remote, count in gpu.peers.items():
            hidden = remote not in own and (remote not in visible or remote == INVISIBLE_REMOTE)
            key = "nvswitch" if hidden else remote
            peers[key] = peers.get(key, 0) + count
        out.append(NvmlGpu(**{**gpu.__dict__, "peers": peers}))
    return out


def nvlink_label(a: NvmlGpu, b: NvmlGpu) -> str | None:
    """NV# between two GPUs: direct links, or both on the NVSwitch fabric; None when neither."""
    # Each end reports its own links; a link down at one end leaves the smaller count usable.
    ends = (a.peers.get(b.bus_id, 0), b.peers.get(a.bus_id, 0))
    direct = min(ends) if all(ends) else max(ends)
    fabric = min(a.peers.get("nvswitch", 0), b.peers.get("nvswitch", 0))
    count = direct + fabric
    return f"NV{count}" if count else None


def pair_answers(raw: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """NVML's per-pair answers keyed by (index, index), both orders."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for pair in raw.get("pairs") or []:
        a, b = pair.get("a"), pair.get("b")
        if isinstance(a, int) and isinstance(b, int):
            out[(a, b)] = out[(b, a)] = pair
    return out


def pcie_label(pair: dict[str, Any]) -> str | None:
    return COMMON_ANCESTOR.get(pair.get("common_ancestor"))  # type: ignore[arg-type]


def p2p_problems(pair: dict[str, Any]) -> dict[str, str]:
    """The P2P capabilities NVML does not report OK for a pair: {"read": "DISABLED_BY_REGKEY"}."""
    out = {}
    for cap in ("read", "write"):
        answer = pair.get(f"p2p_{cap}")
        if isinstance(answer, int) and answer != 0:
            out[cap] = P2P_STATUS.get(answer, str(answer))
    return out
