"""The GPUs as the driver sees them: NVML when the node has pynvml, else nvidia-smi's CSV."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import Any, Literal

from doctor.capture import Capture
from doctor.facts.child import last_words
from doctor.facts.driver import field, nvidia_call
from doctor.model import Missing

MIB = 1 << 20
# The probe's --query-gpu list (doctor/probe.py NVIDIA_SMI_FIELDS), in order.
SMI_COLUMNS = (
    "index",
    "name",
    "bus_id",
    "uuid",
    "memory_total",
    "persistence_mode",
    "ecc_mode",
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "ecc_corrected_volatile",
    "driver_version",
)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    bus_id: str  # sysfs form, "0000:07:00.0", to match the PCI facts
    uuid: str | None
    memory_total: int | None  # bytes
    persistence_mode: bool | None
    ecc_enabled: bool | None
    ecc_uncorrected_volatile: int | None  # since the last driver load
    ecc_uncorrected_aggregate: int | None  # over the GPU's life
    ecc_corrected_volatile: int | None


@dataclass(frozen=True)
class GpuFacts:
    gpus: tuple[Gpu, ...]
    source: Literal["nvml", "nvidia-smi"]


_BDF = re.compile(r"^(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$")


def sysfs_bus_id(bus_id: str) -> str:
    """NVML/nvidia-smi "00000000:07:00.0" → sysfs "0000:07:00.0" (4-digit domain, lower case).

    Text that is not a bus id comes back as it was (stripped), to be shown, never matched.
    """
    text = bus_id.strip().lower()
    m = _BDF.match(text)
    if m is None:
        return text
    domain, bus, device, function = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_nvml(device: dict[str, Any]) -> Gpu | None:
    name, bus_id = field(device.get("name")), field(device.get("bus_id"))
    if not isinstance(bus_id, str):
        return None  # no handle, or no PCI info: nothing to match it to
    persistence = _int(field(device.get("persistence_mode")))
    ecc = field(device.get("ecc_mode"))  # [current, pending]
    uuid = field(device.get("uuid"))
    return Gpu(
        index=int(device.get("index", -1)),
        name=name if isinstance(name, str) else "?",
        bus_id=sysfs_bus_id(bus_id),
        uuid=uuid if isinstance(uuid, str) else None,
        memory_total=_int(field(device.get("memory_total"))),
        persistence_mode=None if persistence is None else persistence == 1,
        ecc_enabled=bool(ecc[0]) if isinstance(ecc, list) and ecc else None,
        ecc_uncorrected_volatile=_int(field(device.get("ecc_uncorrected_volatile"))),
        ecc_uncorrected_aggregate=_int(field(device.get("ecc_uncorrected_aggregate"))),
        ecc_corrected_volatile=_int(field(device.get("ecc_corrected_volatile"))),
    )


def _smi_int(text: str) -> int | None:
    """nvidia-smi numbers; "[N/A]" and "[Not Supported]" are None."""
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _smi_flag(text: str) -> bool | None:
    return {"enabled": True, "disabled": False}.get(text.strip().lower())


def parse_smi_csv(text: str) -> tuple[Gpu, ...]:
    """``nvidia-smi --query-gpu=<SMI_COLUMNS> --format=csv,noheader,nounits`` (memory in MiB)."""
    gpus = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) != len(SMI_COLUMNS):
            continue
        col = dict(zip(SMI_COLUMNS, (c.strip() for c in row), strict=True))
        mib = _smi_int(col["memory_total"])
        gpus.append(
            Gpu(
                index=_smi_int(col["index"]) or 0,
                name=col["name"],
                bus_id=sysfs_bus_id(col["bus_id"]),
                uuid=col["uuid"] or None,
                memory_total=None if mib is None else mib * MIB,
                persistence_mode=_smi_flag(col["persistence_mode"]),
                ecc_enabled=_smi_flag(col["ecc_mode"]),
                ecc_uncorrected_volatile=_smi_int(col["ecc_uncorrected_volatile"]),
                ecc_uncorrected_aggregate=_smi_int(col["ecc_uncorrected_aggregate"]),
                ecc_corrected_volatile=_smi_int(col["ecc_corrected_volatile"]),
            )
        )
    return tuple(gpus)


def parse_gpus(cap: Capture) -> GpuFacts | Missing:
    call = nvidia_call(cap)
    if isinstance(call, dict) and isinstance(call.get("devices"), list) and call["devices"]:
        gpus = tuple(g for g in map(_from_nvml, call["devices"]) if g is not None)
        return GpuFacts(gpus, "nvml")
    smi = cap.command("nvidia-smi")
    if not isinstance(smi, Missing) and smi.rc == 0:
        return GpuFacts(parse_smi_csv(smi.stdout), "nvidia-smi")
    if not isinstance(smi, Missing):
        return Missing(f"nvidia-smi failed: {last_words(smi, stdout_too=True)}", "failed")
    if isinstance(call, Missing):
        return call
    init = field(call.get("nvmlInit"))
    nvml = init.reason if isinstance(init, Missing) else field(call.get("pynvml"))
    reason = nvml.reason if isinstance(nvml, Missing) else str(nvml)
    return Missing(f"no GPU list: NVML gave none ({reason}) and nvidia-smi is not there", "absent")
