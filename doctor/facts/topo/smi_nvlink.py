"""`nvidia-smi nvlink -s` (link state and speed) and `-e` (error counters) as the NVLink facts the
NVML path gives (doctor/facts/topo/nvml.py), for a node seen through pasted text.

Both print, per GPU, a header ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`` and then one line
per link: ``Link 0: 26.562 GB/s`` or ``Link 3: <inactive>`` for ``-s``; ``Link 0: Replay Errors:
0``, ``Recovery Errors``, ``CRC Errors`` (``CRC Data Errors`` on some drivers) for ``-e``, the
counters of nvmlDeviceGetNvLinkErrorCounter. Neither shows where a link goes (``-R`` would), so a
GPU's ``peers`` stay empty; the header has no PCI bus id ("?").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.facts.topo.nvml import NvmlGpu

STATUS_SLOT = "nvidia-smi:nvlink-status"
ERRORS_SLOT = "nvidia-smi:nvlink-errors"

GPU_HEADER = re.compile(r"^\s*GPU (?P<index>\d+): (?P<model>.+?)\s*\(UUID: (?P<uuid>[^)]*)\)")
_SPEED = re.compile(r"^\s*Link (?P<link>\d+): (?P<value>\d+(?:\.\d+)?) ?(?:GB/s|Gbps|GT/s)\s*$")
_INACTIVE = re.compile(
    r"^\s*Link (?P<link>\d+): (?:<inactive>|inactive|Inactive|Not Active|Down|Disabled)\s*$"
)
_ERROR = re.compile(r"^\s*Link (?P<link>\d+): (?P<name>[A-Za-z ]+?) Errors?: (?P<count>\d+)\s*$")
# nvidia-smi's names → NVML's counters (nvmlNvLinkErrorCounter_t), as the probe keys them.
_COUNTERS = {
    "replay": "replay",
    "recovery": "recovery",
    "crc": "crc_flit",
    "crc flit": "crc_flit",
    "flit crc": "crc_flit",
    "crc data": "crc_data",
    "data crc": "crc_data",
}
NO_NVLINK = re.compile(r"Unable to retrieve NVLink information", re.I)


@dataclass
class _Gpu:
    model: str
    active: set[int] = field(default_factory=set)
    inactive: set[int] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)


def _read(text: str, gpus: dict[int, _Gpu], *, errors: bool) -> None:
    """Link states (``errors`` False) or error counters from one output into ``gpus``: one
    pasted segment may hold both outputs and sit in both slots, each read once."""
    gpu = None
    for line in text.splitlines():
        if header := GPU_HEADER.match(line):
            gpu = gpus.setdefault(int(header["index"]), _Gpu(header["model"]))
        elif gpu is None:
            continue
        elif errors:
            error = _ERROR.match(line)
            if error and (counter := _COUNTERS.get(error["name"].strip().lower())):
                gpu.errors[counter] = gpu.errors.get(counter, 0) + int(error["count"])
        elif speed := _SPEED.match(line):
            gpu.active.add(int(speed["link"]))
        elif down := _INACTIVE.match(line):
            gpu.inactive.add(int(down["link"]))


def nvlink_gpus(status: str | None, errors: str | None) -> list[NvmlGpu]:
    """The GPUs the two outputs show, in index order, as the NVML path's facts."""
    gpus: dict[int, _Gpu] = {}
    _read(status or "", gpus, errors=False)
    _read(errors or "", gpus, errors=True)
    return [
        NvmlGpu(
            name=f"GPU{index}",
            model=gpu.model,
            bus_id="?",
            links_up=len(gpu.active),
            links_down=len(gpu.inactive - gpu.active),
            peers={},
            cpu_affinity="N/A",
            numa_affinity="N/A",
            numa_id="N/A",
            link_errors=gpu.errors,
        )
        for index, gpu in sorted(gpus.items())
    ]


def shows_nvlink(text: str) -> tuple[bool, bool]:
    """(link state, error counters): what a pasted text holds of `nvidia-smi nvlink -s` / `-e`
    under a GPU header (a bare `nvidia-smi -L` has the header and neither)."""
    lines = text.splitlines()
    if not any(GPU_HEADER.match(line) for line in lines):
        return False, False
    status = any(_SPEED.match(ln) or _INACTIVE.match(ln) for ln in lines) or bool(
        NO_NVLINK.search(text)
    )
    return status, any(_ERROR.match(line) for line in lines)
