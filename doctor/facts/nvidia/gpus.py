"""The GPUs as the driver sees them: NVML when the node has pynvml, else nvidia-smi's reports."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words
from doctor.facts.gpu import Gpu, GpuFacts, GpuHealth, Source, sysfs_bus_id
from doctor.facts.nvidia.driver import field as answer
from doctor.facts.nvidia.driver import nvidia_call
from doctor.facts.nvidia.gpu_health import (
    compute_mode,
    ecc_counts,
    flag,
    health_from_nvml,
    health_from_tree,
    integer,
    size,
    throttle_names,
)
from doctor.facts.nvidia.gpu_vitals import (
    signed,
    vitals_from_nvml,
    vitals_from_tree,
    watts,
)
from doctor.facts.nvidia.smi import CSV, XML, smi_report
from doctor.facts.nvidia.smi_table import SmiTable, TableGpu
from doctor.facts.nvidia.smi_tree import Entry

MIB = 1 << 20
# The --query-gpu list of captures whose probe fell back to CSV (noheader, before `-q -x`): their
# columns come from here when the argv does not name them.
SMI_COLUMNS = (
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "memory.total",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.volatile.total",
    "driver_version",
)
# --query-gpu names (nvidia-smi --help-query-gpu, aliases included) → the Gpu/GpuHealth field.
CSV_FIELDS = {
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "pci.bus_id": "bus_id",
    "gpu_bus_id": "bus_id",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "memory.total": "memory_total",
    "persistence_mode": "persistence_mode",
    "ecc.mode.current": "ecc_enabled",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_volatile",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_aggregate",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_volatile",
    "compute_mode": "compute_mode",
    "mig.mode.current": "mig",
    "mig.mode.pending": "mig_pending",
    "pcie.link.gen.current": "pcie_gen",
    "pcie.link.gen.gpucurrent": "pcie_gen",
    "pcie.link.gen.max": "pcie_gen_max",
    "pcie.link.width.current": "pcie_width",
    "pcie.link.width.max": "pcie_width_max",
    "clocks_throttle_reasons.active": "throttle",
    "clocks_event_reasons.active": "throttle",
    "retired_pages.pending": "retired_pending",
    "retired_pages.single_bit_ecc.count": "retired_sbe",
    "retired_pages.sbe": "retired_sbe",
    "retired_pages.double_bit.count": "retired_dbe",
    "retired_pages.dbe": "retired_dbe",
    "remapped_rows.pending": "remap_pending",
    "remapped_rows.failure": "remap_failed",
    "temperature.gpu": "temperature",
    "power.limit": "power_limit",
    "enforced.power.limit": "power_limit",
    "power.default_limit": "power_default",
    "clocks.applications.graphics": "app_clock",
    "clocks.applications.gr": "app_clock",
    "clocks.default_applications.graphics": "app_clock_default",
    "clocks.default_applications.gr": "app_clock_default",
    "clocks.applications.memory": "app_mem_clock",
    "clocks.applications.mem": "app_mem_clock",
    "clocks.default_applications.memory": "app_mem_clock_default",
    "clocks.default_applications.mem": "app_mem_clock_default",
    "vbios_version": "vbios",
    "inforom.img": "inforom_version",
    "inforom.image": "inforom_version",
}
_REASON_FIELD = re.compile(r"^clocks_(?:throttle|event)_reasons\.(\w+)$")
_HEADER_UNIT = re.compile(r"^\s*([\w.]+)\s*(?:\[(\w+)\])?\s*$")


SOURCES: dict[str, Source] = {
    "nvidia-smi:xml": "nvidia-smi -q -x",
    "nvidia-smi:query": "nvidia-smi -q",
    "nvidia-smi:table": "nvidia-smi table",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_nvml(device: dict[str, Any]) -> Gpu | None:
    name, bus_id = answer(device.get("name")), answer(device.get("bus_id"))
    if not isinstance(bus_id, str):
        return None  # no handle, or no PCI info: nothing to match it to
    persistence = _int(answer(device.get("persistence_mode")))
    ecc = answer(device.get("ecc_mode"))  # [current, pending]
    uuid = answer(device.get("uuid"))
    return Gpu(
        index=int(device.get("index", -1)),
        name=name if isinstance(name, str) else "?",
        bus_id=sysfs_bus_id(bus_id),
        uuid=uuid if isinstance(uuid, str) else None,
        memory_total=_int(answer(device.get("memory_total"))),
        persistence_mode=None if persistence is None else persistence == 1,
        ecc_enabled=bool(ecc[0]) if isinstance(ecc, list) and ecc else None,
        ecc_uncorrected_volatile=_int(answer(device.get("ecc_uncorrected_volatile"))),
        ecc_uncorrected_aggregate=_int(answer(device.get("ecc_uncorrected_aggregate"))),
        ecc_corrected_volatile=_int(answer(device.get("ecc_corrected_volatile"))),
        health=replace(health_from_nvml(device), **vitals_from_nvml(device)),
    )


def _csv_columns(header: list[str]) -> list[tuple[str, str]] | None:
    """A CSV header row → (query field, unit) per column; None if a cell is no field name."""
    out = []
    for cell in header:
        m = _HEADER_UNIT.match(cell)
        if m is None or not ("." in m.group(1) or m.group(1) in CSV_FIELDS):
            return None
        out.append((m.group(1).lower(), (m.group(2) or "").lower()))
    return out


def _csv_gpu(values: dict[str, str], units: dict[str, str], reasons: list[str]) -> Gpu:
    def unit(key: str) -> str:
        return units.get(key) or "mib"  # nounits CSV: memory in MiB, as --help-query-gpu says

    sbe, dbe = integer(values.get("retired_sbe")), integer(values.get("retired_dbe"))
    throttle = values.get("throttle")
    mask = int(throttle, 16) if throttle and re.fullmatch(r"0x[0-9a-fA-F]+", throttle) else None
    health = GpuHealth(
        compute_mode=compute_mode(values.get("compute_mode")),
        mig=flag(values.get("mig")),
        mig_pending=flag(values.get("mig_pending")),
        pcie_gen=integer(values.get("pcie_gen")),
        pcie_gen_max=integer(values.get("pcie_gen_max")),
        pcie_width=integer(values.get("pcie_width")),
        pcie_width_max=integer(values.get("pcie_width_max")),
        throttle=throttle_names(mask) if mask is not None else (tuple(reasons) or None),
        retired_pages=None if sbe is None and dbe is None else (sbe or 0) + (dbe or 0),
        retired_pending=flag(values.get("retired_pending")),
        remap_pending=flag(values.get("remap_pending")),
        remap_failed=flag(values.get("remap_failed")),
        temperature=signed(values.get("temperature")),
        power_limit=watts(values.get("power_limit")),
        power_default=watts(values.get("power_default")),
        app_clock=signed(values.get("app_clock")),
        app_clock_default=signed(values.get("app_clock_default")),
        app_mem_clock=signed(values.get("app_mem_clock")),
        app_mem_clock_default=signed(values.get("app_mem_clock_default")),
        vbios=_known(values.get("vbios")),
        inforom_version=_known(values.get("inforom_version")),
    )
    index = integer(values.get("index"))
    return Gpu(
        index=-1 if index is None else index,
        name=values.get("name") or "?",
        bus_id=sysfs_bus_id(values.get("bus_id") or "?"),
        uuid=values.get("uuid") or None,
        memory_total=size(values.get("memory_total"), unit("memory_total")),
        persistence_mode=flag(values.get("persistence_mode")),
        ecc_enabled=flag(values.get("ecc_enabled")),
        ecc_uncorrected_volatile=integer(values.get("ecc_uncorrected_volatile")),
        ecc_uncorrected_aggregate=integer(values.get("ecc_uncorrected_aggregate")),
        ecc_corrected_volatile=integer(values.get("ecc_corrected_volatile")),
        health=health,
    )


def _known(text: str | None) -> str | None:
    """A CSV cell's text, None for an unavailable one ("[N/A]", "[Not Supported]")."""
    return text if text and not text.startswith("[") and text != "N/A" else None


def query_fields(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The --query-gpu=a,b,c list of an nvidia-smi command line."""
    for arg in argv:
        if arg.startswith("--query-gpu="):
            return tuple(f.strip().lower() for f in arg.partition("=")[2].split(",") if f.strip())
    return None


def parse_smi_csv(text: str, fields: tuple[str, ...] = SMI_COLUMNS) -> tuple[Gpu, ...]:
    """``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``: a header row, where
    there is one, names the columns (and their units); rows of another width are skipped."""
    rows = [r for r in csv.reader(text.splitlines()[:4096], skipinitialspace=True) if r]
    columns = [(f, "") for f in fields]
    gpus = []
    for row in rows:
        header = _csv_columns(row)
        if header is not None and any(f in CSV_FIELDS for f, _ in header):
            columns = header
            continue
        if len(row) != len(columns):
            continue
        values: dict[str, str] = {}
        units: dict[str, str] = {}
        reasons = []
        for (name, unit), cell in zip(columns, row, strict=True):
            key, cell = CSV_FIELDS.get(name), cell.strip()
            reason = _REASON_FIELD.match(name)
            if reason and flag(cell):
                reasons.append("idle" if reason.group(1) == "gpu_idle" else reason.group(1))
            if key:
                values[key], units[key] = cell, unit
        gpus.append(_csv_gpu(values, units, reasons))
    return tuple(gpus)


def _from_tree(gpu: Entry, position: int) -> Gpu:
    bus = gpu.text("pci", "pci_bus_id") or gpu.text("pci", "bus_id") or gpu.text("id") or "?"
    ecc_volatile = ecc_counts(gpu, "volatile")
    ecc_aggregate = ecc_counts(gpu, "aggregate")
    return Gpu(
        index=position,  # -q prints no index: its order is nvidia-smi's, which is the index
        name=gpu.text("product_name") or "?",
        bus_id=sysfs_bus_id(bus),
        uuid=gpu.text("uuid") or gpu.text("gpu_uuid"),
        memory_total=size(gpu.text("fb_memory_usage", "total")),
        persistence_mode=flag(gpu.text("persistence_mode")),
        ecc_enabled=flag(gpu.text("ecc_mode", "current_ecc") or gpu.text("ecc_mode", "current")),
        ecc_uncorrected_volatile=ecc_volatile[0],
        ecc_uncorrected_aggregate=ecc_aggregate[0],
        ecc_corrected_volatile=ecc_volatile[1],
        health=replace(health_from_tree(gpu), **vitals_from_tree(gpu)),
    )


def _from_table(gpu: TableGpu) -> Gpu:
    procs = None if gpu.processes is None else tuple(gpu.processes)
    return Gpu(
        index=gpu.index,
        name=gpu.name,
        bus_id=sysfs_bus_id(gpu.bus_id or "?"),
        uuid=None,
        memory_total=gpu.memory_total,
        persistence_mode=gpu.persistence_mode,
        ecc_enabled=None,
        ecc_uncorrected_volatile=gpu.ecc_uncorrected_volatile,
        ecc_uncorrected_aggregate=None,
        ecc_corrected_volatile=None,
        health=GpuHealth(compute_mode=gpu.compute_mode, mig=gpu.mig, processes=procs),
    )


def _smi_gpus(cap: Capture) -> GpuFacts | None:
    found = smi_report(cap)
    if found is None:
        return None
    name, report = found
    if isinstance(report, SmiTable):
        return GpuFacts(tuple(map(_from_table, report.gpus)), SOURCES[name])
    gpus = tuple(_from_tree(g, i) for i, g in enumerate(report.all("gpu")))
    return GpuFacts(gpus, SOURCES[name])


def parse_gpus(cap: Capture) -> GpuFacts | Missing:
    call = nvidia_call(cap)
    if isinstance(call, dict) and isinstance(call.get("devices"), list) and call["devices"]:
        gpus = tuple(g for g in map(_from_nvml, call["devices"]) if g is not None)
        return GpuFacts(gpus, "nvml")
    reports = _smi_gpus(cap)
    if reports is not None:
        return reports
    smi = cap.command(CSV)
    if not isinstance(smi, Missing) and smi.rc == 0:
        gpus = parse_smi_csv(smi.stdout, query_fields(smi.argv) or SMI_COLUMNS)
        return GpuFacts(gpus, "nvidia-smi")
    for name in (XML, CSV):
        ran = cap.command(name)
        if not isinstance(ran, Missing):
            why = last_words(ran, stdout_too=True) if ran.rc else "it listed no GPU"
            return Missing(f"nvidia-smi failed: {why}", "failed")
    if isinstance(call, Missing):
        return call
    init = answer(call.get("nvmlInit"))
    nvml = init.reason if isinstance(init, Missing) else answer(call.get("pynvml"))
    reason = nvml.reason if isinstance(nvml, Missing) else str(nvml)
    return Missing(f"no GPU list: NVML gave none ({reason}) and nvidia-smi is not there", "absent")
