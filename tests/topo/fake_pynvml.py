"""A stand-in for the pynvml module: a MOCK of NVML, since no GPU exists where the tests run.

It answers only the calls the probe makes, with the shapes nvidia-ml-py's pynvml.py documents:
handles from nvmlDeviceGetHandleByIndex; nvmlDeviceGetPciInfo(h).busId (bytes in older bindings,
"00000000:1B:00.0" spelling); affinity calls return lists of 64-bit words; NVLink calls take a
link index and raise NVMLError_NotSupported on GPUs without NVLink and NVMLError_InvalidArgument
past the last link (error counters take a counter index too);
nvmlDeviceGetTopologyCommonAncestor returns an nvmlGpuTopologyLevel_t (0, 10, 20, 30, 40, 50);
nvmlDeviceGetP2PStatus returns an nvmlGpuP2PStatus_t (0 OK … 6 UNKNOWN).
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from typing import Any

from doctor.stages import probe

SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
GPU_TYPE = 0


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass


@dataclass
class Link:
    remote: str  # remote PCI bus id in NVML spelling
    up: bool = True
    remote_type: int = SWITCH
    # nvmlDeviceGetNvLinkErrorCounter by counter (DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT,
    # DL_CRC_DATA); None: the call raises NotSupported, as on GPUs that do not count them.
    errors: tuple[int, int, int, int] | None = (0, 0, 0, 0)


@dataclass
class Gpu:
    bus_id: str  # "00000000:1B:00.0"
    cpus: list[int]  # CPU affinity words
    nodes: list[int]  # memory (NUMA) affinity words
    links: list[Link] = field(default_factory=list)
    name: str = "NVIDIA H100 80GB HBM3"


def fake_module(
    gpus: list[Gpu],
    ancestor: dict[tuple[int, int], int],
    p2p: dict[tuple[int, int], int] | None = None,
    *,
    remote_type_call: bool = True,
) -> types.ModuleType:
    """A module object with pynvml's names; ``ancestor``/``p2p`` are keyed by (low, high) index."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVML_NVLINK_MAX_LINKS = 18  # type: ignore[attr-defined]
    m.NVML_NVLINK_CAP_P2P_SUPPORTED = 0  # type: ignore[attr-defined]
    m.NVML_P2P_CAPS_INDEX_READ = 0  # type: ignore[attr-defined]
    m.NVML_P2P_CAPS_INDEX_WRITE = 1  # type: ignore[attr-defined]
    m.NVML_P2P_CAPS_INDEX_NVLINK = 2  # type: ignore[attr-defined]

    def link(h: int, n: int) -> Link:
        if not gpus[h].links:
            raise NVMLError_NotSupported("Not Supported")
        if n >= len(gpus[h].links):
            raise NVMLError_InvalidArgument("Invalid Argument")
        return gpus[h].links[n]

    def counter(h: int, n: int, which: int) -> int:
        errors = link(h, n).errors
        if errors is None:
            raise NVMLError_NotSupported("Not Supported")
        return errors[which]

    def pair(table: dict[tuple[int, int], int], a: int, b: int, default: int) -> int:
        return table.get((min(a, b), max(a, b)), default)

    calls: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.90.07",
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: gpus[h].name,
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=gpus[h].bus_id.encode()),
        "nvmlDeviceGetCpuAffinity": lambda h, n: (gpus[h].cpus + [0] * n)[:n],
        "nvmlDeviceGetMemoryAffinity": lambda h, n, scope: (gpus[h].nodes + [0] * n)[:n],
        "nvmlDeviceGetNumaNodeId": lambda h: (_ for _ in ()).throw(
            NVMLError_NotSupported("Not Supported")
        ),
        "nvmlDeviceGetNvLinkState": lambda h, n: 1 if link(h, n).up else 0,
        "nvmlDeviceGetNvLinkCapability": lambda h, n, cap: 1 if link(h, n) else 0,
        "nvmlDeviceGetNvLinkRemotePciInfo": lambda h, n: types.SimpleNamespace(
            busId=link(h, n).remote
        ),
        "nvmlDeviceGetNvLinkErrorCounter": counter,
        "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: pair(ancestor, a, b, 50),
        "nvmlDeviceGetP2PStatus": lambda a, b, cap: pair(p2p or {}, a, b, 0),
    }
    if remote_type_call:
        calls["nvmlDeviceGetNvLinkRemoteDeviceType"] = lambda h, n: link(h, n).remote_type
    for name, fn in calls.items():
        setattr(m, name, fn)
    return m


def nvml_answers(module: types.ModuleType) -> dict[str, Any]:
    """What the probe's NVML collector records with this module as pynvml, through JSON."""
    saved = sys.modules.get("pynvml")
    sys.modules["pynvml"] = module
    try:
        raw = probe._nvml_topology()
    finally:
        if saved is None:
            del sys.modules["pynvml"]
        else:
            sys.modules["pynvml"] = saved
    return json.loads(json.dumps(raw))
