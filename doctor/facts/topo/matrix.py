"""The topology matrix: GPUs and NICs, the link label between every pair, per-device affinity."""

from __future__ import annotations

import re
from dataclasses import dataclass

# nvidia-smi's labels, best first. NV# (a bonded set of # NVLinks) beats every PCIe level.
PCIE_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
KNOWN_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
GPU_NAME = re.compile(r"GPU\d+")
NVLINK = re.compile(r"NV(\d+)")
# AMD's GPU fabric, as RCCL names its link type: "XGMI" one hop, "XGMI2" two hops (KFD's count).
XGMI = re.compile(r"XGMI(\d*)")

LEGEND = (
    ("X", "Self"),
    ("SYS", "PCIe plus the SMP interconnect between NUMA nodes (e.g. QPI/UPI)"),
    ("NODE", "PCIe plus the interconnect between PCIe host bridges within one NUMA node"),
    ("PHB", "PCIe plus a PCIe host bridge (typically the CPU)"),
    ("PXB", "multiple PCIe bridges, without crossing the PCIe host bridge"),
    ("PIX", "at most a single PCIe bridge"),
    ("NV#", "a bonded set of # NVLinks"),
    ("XGMI#", "AMD Infinity Fabric (XGMI), # hops when more than one"),
)


def legend(cells: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, str], ...]:
    """The legend for one matrix: one GPU fabric per node, NVLink's or (any XGMI cell) AMD's."""
    amd = any(XGMI.fullmatch(c) for row in cells for c in row)
    return tuple(item for item in LEGEND if item[0] != ("NV#" if amd else "XGMI#"))


def is_label(text: str) -> bool:
    return text == "X" or text in PCIE_LEVELS or gpu_fabric(text)


def gpu_fabric(label: str) -> bool:
    """NVLink or XGMI: a direct GPU-GPU link rather than PCIe."""
    return NVLINK.fullmatch(label) is not None or XGMI.fullmatch(label) is not None


def xgmi_label(hops: int | None) -> str:
    return "XGMI" if not hops or hops == 1 else f"XGMI{hops}"


def nvlink_count(label: str) -> int:
    """How many NVLinks a label names (0 for PCIe levels and X)."""
    match = NVLINK.fullmatch(label)
    return int(match.group(1)) if match else 0


def closeness(label: str) -> tuple[int, int]:
    """A sort key: smaller is closer (X, then more NVLinks, then PIX … SYS)."""
    if label == "X":
        return (0, 0)
    if NVLINK.fullmatch(label):
        return (1, -nvlink_count(label))
    xgmi = XGMI.fullmatch(label)
    if xgmi:
        return (1, int(xgmi.group(1) or 1))
    return (2 + PCIE_LEVELS.index(label), 0)


def nccl_path(label: str) -> str:
    """NCCL's path type for a label (NCCL has no NODE: it merges host bridges per NUMA node)."""
    if NVLINK.fullmatch(label):
        return "NVL"
    if XGMI.fullmatch(label):
        return "XGMI"  # RCCL's name for the link type NCCL calls NVL (src/graph/topo.cc)
    return {"X": "LOC", "NODE": "PHB"}.get(label, label)


@dataclass(frozen=True)
class Topology:
    """What `nvidia-smi topo -m` shows, with NICs named by their device names.

    ``cells[i][j]`` is the label from ``devices[i]`` to ``devices[j]``; ``affinity[i]`` holds the
    values of ``columns`` for device i, in order, and may be shorter (NIC rows carry none).
    ``nic_legend`` says the NICs are shown as NIC0, NIC1, … with a legend under the matrix.
    """

    devices: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    columns: tuple[str, ...]
    affinity: tuple[tuple[str, ...], ...]
    nic_legend: bool = False

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if GPU_NAME.fullmatch(d))

    @property
    def nics(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if not GPU_NAME.fullmatch(d))

    def label(self, a: str, b: str) -> str:
        return self.cells[self.devices.index(a)][self.devices.index(b)]

    def links(self) -> dict[str, str]:
        """Every pair once, in matrix order: {"GPU0-GPU1": "NV12", "GPU0-mlx5_0": "PXB", ...}."""
        out = {}
        for i, a in enumerate(self.devices):
            for j in range(i + 1, len(self.devices)):
                out[f"{a}-{self.devices[j]}"] = self.cells[i][j]
        return out

    def affinity_of(self, device: str) -> dict[str, str]:
        return dict(zip(self.columns, self.affinity[self.devices.index(device)], strict=False))

    def closest_nics(
        self, gpu: str, among: tuple[str, ...] | None = None
    ) -> tuple[str, tuple[str, ...]]:
        """The label of the NICs closest to a GPU, and those NICs (('', ()) with no NIC)."""
        nics = self.nics if among is None else among
        if not nics:
            return ("", ())
        best = min((self.label(gpu, n) for n in nics), key=closeness)
        return (best, tuple(n for n in nics if self.label(gpu, n) == best))

    def nvlink_totals(self) -> dict[str, int]:
        """Sum of NVLink counts from each GPU to its peers (equal on a healthy, uniform box)."""
        return {
            g: sum(nvlink_count(self.label(g, p)) for p in self.gpus if p != g) for g in self.gpus
        }
