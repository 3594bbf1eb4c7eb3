"""What the amdsmi Python bindings told the probe's child: ECC, bad pages, processes, firmware.

The child's answers have the shapes of amdsmi's py-interface/amdsmi_interface.py (ROCm 6.x):
``amdsmi_get_gpu_total_ecc_count`` → {correctable_count, uncorrectable_count, deferred_count},
``amdsmi_get_gpu_bad_page_info`` → [{value, page_address, page_size, status}] with status 0
reserved, 1 pending, 2 unreservable (AMDSMI_MEM_PAGE_STATUS_*; enums arrive by name),
``amdsmi_get_gpu_process_list`` → [{name, pid, mem, ...}], ``amdsmi_get_fw_info`` →
{fw_list: [{fw_name, fw_version}]}, ``amdsmi_topo_get_link_type`` → {hops, type} with type 1
XGMI and 2 PCIe (AMDSMI_LINK_TYPE_*). Each answer is {"value": ...} or {"error": "..."}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words, marked
from doctor.facts.gpu import sysfs_bus_id

# Must match AMD_MARK in doctor/stages/probe.py.
MARK = "@@cluster-doctor-amd@@"
LINK_TYPES = {0: "internal", 1: "XGMI", 2: "PCIe"}
PENDING = {1, "1", "AMDSMI_MEM_PAGE_STATUS_PENDING", "PENDING"}


@dataclass(frozen=True)
class SmiGpu:
    bus_id: str
    ecc_uncorrectable: int | None
    ecc_correctable: int | None
    bad_pages: int | None
    bad_pages_pending: int | None
    processes: tuple[tuple[int, str, int | None], ...] | None  # (pid, name, bytes)
    firmware: tuple[tuple[str, str], ...]  # (block, version)
    driver: str | None


@dataclass(frozen=True)
class SmiLink:
    a: str  # bus ids
    b: str
    type: str
    hops: int | None


@dataclass(frozen=True)
class AmdSmi:
    gpus: tuple[SmiGpu, ...]
    links: tuple[SmiLink, ...]
    lib_version: str | None


def _answer(entry: Any) -> Any:
    """An answer's value, or None where the call failed."""
    return entry.get("value") if isinstance(entry, dict) and "error" not in entry else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(value: Any) -> str:
    return str(value).rsplit(".", 1)[-1].removeprefix("AMDSMI_FW_ID_")


def _gpu(device: dict[str, Any]) -> SmiGpu | None:
    bdf = _answer(device.get("bdf"))
    if not isinstance(bdf, str):
        return None
    ecc = _answer(device.get("ecc"))
    ecc = ecc if isinstance(ecc, dict) else {}
    pages = _answer(device.get("bad_pages"))
    pages = [p for p in pages if isinstance(p, dict)] if isinstance(pages, list) else None
    procs = _answer(device.get("processes"))
    processes = None
    if isinstance(procs, list):
        processes = tuple(
            (p["pid"], str(p.get("name") or "?"), _int(p.get("mem")))
            for p in procs
            if isinstance(p, dict) and _int(p.get("pid")) is not None
        )
    fw = _answer(device.get("firmware"))
    fw_list = fw.get("fw_list") if isinstance(fw, dict) else None
    firmware = tuple(
        (_name(f.get("fw_name")), str(f.get("fw_version")))
        for f in fw_list or []
        if isinstance(f, dict) and f.get("fw_name") is not None
    )
    driver = _answer(device.get("driver"))
    return SmiGpu(
        bus_id=sysfs_bus_id(bdf),
        ecc_uncorrectable=_int(ecc.get("uncorrectable_count")),
        ecc_correctable=_int(ecc.get("correctable_count")),
        bad_pages=None if pages is None else len(pages),
        bad_pages_pending=None if pages is None else sum(p.get("status") in PENDING for p in pages),
        processes=processes,
        firmware=firmware,
        driver=str(driver.get("driver_version")) if isinstance(driver, dict) else None,
    )


def parse_amd_smi(cap: Capture) -> AmdSmi | Missing:
    result = cap.command("amdsmi")
    if isinstance(result, Missing):
        return result
    data, _ = marked(result, MARK)
    if data is None:
        return Missing(f"the amdsmi child died: {last_words(result)}", "failed")
    imported, init = data.get("amdsmi"), data.get("init")
    if isinstance(imported, dict) and "error" in imported:
        return Missing(f"amdsmi cannot be imported: {imported['error']}", "absent")
    if isinstance(init, dict) and "error" in init:
        return Missing(f"amdsmi_init failed: {init['error']}", "failed")
    devices = [d for d in data.get("devices") or [] if isinstance(d, dict)]
    parsed = [(d, _gpu(d)) for d in devices]
    gpus = [g for _, g in parsed if g is not None]
    by_index = {d.get("index"): g.bus_id for d, g in parsed if g is not None}
    links = []
    for entry in data.get("links") or []:
        link = _answer(entry.get("link")) if isinstance(entry, dict) else None
        a, b = by_index.get(entry.get("a")), by_index.get(entry.get("b"))
        if isinstance(link, dict) and a and b:
            kind = link.get("type")
            name = str(LINK_TYPES.get(kind, kind)) if isinstance(kind, int) else _name(kind)
            name = {"LINK_TYPE_XGMI": "XGMI", "LINK_TYPE_PCIE": "PCIe"}.get(
                name.removeprefix("AMDSMI_"), name
            )
            links.append(SmiLink(a, b, name, _int(link.get("hops"))))
    version = _answer(data.get("lib_version"))
    if isinstance(version, dict):  # {major, minor, release, build} in ROCm 6
        version = ".".join(str(version[k]) for k in ("major", "minor", "release") if k in version)
    return AmdSmi(tuple(gpus), tuple(links), None if version is None else str(version))
