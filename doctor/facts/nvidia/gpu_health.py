"""What makes a GPU unfit for training even though it is there: ECC, retirement, PCIe, clocks.

One shape for every source: NVML answers from the probe's child, the `nvidia-smi -q` tree
(text or XML), `--query-gpu` CSV columns and the default table. A field the source did not give
is None: "not reported" is never read as "healthy".
"""

from __future__ import annotations

import re
from typing import Any

from doctor.facts.gpu import GpuHealth, GpuProcess
from doctor.facts.nvidia.smi_tree import Entry, snake

# NVML throttle/clock-event reason bits (nvml.h nvmlClocksEventReason*), with the names
# nvidia-smi -q prints once snake_cased (its XML adds a "clocks_event_reason_" prefix).
THROTTLE_BITS = (
    (0x1, "idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
# nvmlComputeMode_t values and nvidia-smi's spellings ("E. Process" in the table).
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_COMPUTE_TEXT = {
    "default": "default",
    "exclusive_thread": "exclusive_thread",
    "e_thread": "exclusive_thread",
    "prohibited": "prohibited",
    "exclusive_process": "exclusive_process",
    "e_process": "exclusive_process",
}
# nvmlGpuFabricState_t (nvml.h NVML_GPU_FABRIC_STATE_*).
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1 << 10, "mb": 1 << 20}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B|B)?\b", re.IGNORECASE)
_INT = re.compile(r"^\s*(\d+)\s*x?\s*$", re.IGNORECASE)


def flag(value: Any) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active, On/Off, 1/0 → bool; anything else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value) if value in (0, 1) else None
    text = snake(str(value)) if value is not None else ""
    if text in ("enabled", "yes", "active", "on", "1", "true"):
        return True
    if text in ("disabled", "no", "not_active", "off", "0", "false"):
        return False
    return None


def integer(value: Any) -> int | None:
    """'16x', ' 4 ', 4 → int; '[N/A]', 'N/A', negative and other text → None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    m = _INT.match(str(value)) if isinstance(value, str) else None
    return int(m.group(1)) if m else None


def size(value: Any, unit: str = "b") -> int | None:
    """'81920 MiB' → bytes; a bare number counts in ``unit`` ('mib' for nounits CSV)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value * _UNITS[unit] if value >= 0 else None
    m = _SIZE.match(str(value)) if isinstance(value, str) else None
    if m is None:
        return None
    return int(m.group(1)) * _UNITS.get((m.group(2) or unit).lower(), 1)


def compute_mode(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return COMPUTE_MODES.get(value)
    return _COMPUTE_TEXT.get(snake(str(value))) if isinstance(value, str) else None


def throttle_names(mask: Any) -> tuple[str, ...] | None:
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        return None
    return tuple(name for bit, name in THROTTLE_BITS if mask & bit)


def _reason_name(key: str) -> str:
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_", "clocks_throttle_reasons_"):
        key = key.removeprefix(prefix)
    return "idle" if key == "gpu_idle" else key


# -- nvidia-smi -q (text and XML) -------------------------------------------------------------


def _first(gpu: Entry, *paths: tuple[str, ...]) -> str | None:
    for path in paths:
        value = gpu.text(*path)
        if value is not None:
            return value
    return None


def _sum(entry: Entry | None, want: str, avoid: str = "") -> int | None:
    """Sum of the numeric leaves whose key names ``want`` (and not ``avoid``); None if none."""
    if entry is None:
        return None
    values = [
        integer(e.value)
        for key, e in entry.walk()
        if want in key and not (avoid and avoid in key) and not e.children
    ]
    numbers = [v for v in values if v is not None]
    return sum(numbers) if numbers else None


def ecc_counts(gpu: Entry, counter: str) -> tuple[int | None, int | None]:
    """(uncorrected, corrected) of ``volatile`` or ``aggregate``, in every -q layout:
    R470+ "SRAM/DRAM (Un)correctable", R550+ "SRAM Uncorrectable Parity/SEC-DED", and the
    older "Single Bit"/"Double Bit" groups whose "Total" is the count."""
    base = gpu.get("ecc_errors", counter)
    if base is None:
        return None, None
    double, single = base.get("double_bit"), base.get("single_bit")
    if double is not None or single is not None:
        return (
            integer(double.text("total")) if double else None,
            integer(single.text("total")) if single else None,
        )
    return _sum(base, "uncorrectable"), _sum(base, "correctable", avoid="uncorrectable")


def _link(gpu: Entry, group: str, which: str) -> int | None:
    """pci → (gpu_link_info | pci_gpu_link_info) → pcie_gen*/link_width* → max/current."""
    pci = gpu.get("pci")
    for _, info in pci.children if pci else []:
        for key, entry in info.children:
            if key.startswith(group):
                for sub, leaf in entry.children:
                    if sub in (which, f"{which}_link_gen", f"{which}_link_width"):
                        return integer(leaf.value)
    return None


def _throttle(gpu: Entry) -> tuple[str, ...] | None:
    group = next(
        (e for k, e in gpu.children if k.startswith("clocks") and "reason" in k and e.children),
        None,
    )
    if group is None:
        return None
    seen = [(_reason_name(k), flag(e.value)) for k, e in group.walk()]
    if not any(active is not None for _, active in seen):
        return None
    return tuple(name for name, active in seen if active)


def _processes(gpu: Entry) -> tuple[GpuProcess, ...] | None:
    group = gpu.get("processes")
    if group is None:
        return None
    out = []
    for proc in group.all("process_info"):  # XML
        name = proc.text("process_name") or "?"
        out.append(GpuProcess(integer(proc.text("pid")), name, size(proc.text("used_memory"))))
    for proc in group.all("process_id"):  # text: "Process ID : 1234" with its details under it
        name = proc.text("name") or proc.text("process_name") or "?"
        used = proc.text("used_gpu_memory") or proc.text("used_memory")
        out.append(GpuProcess(integer(proc.value), name, size(used)))
    if not out and snake(group.value) not in ("", "none"):
        return None  # "N/A" or something unknown: not "no processes"
    return tuple(out)


def _fabric(gpu: Entry) -> str | None:
    state = gpu.text("fabric", "state")
    name = snake(state) if state else ""
    return name if name in FABRIC_STATES.values() else None


def health_from_tree(gpu: Entry) -> GpuHealth:
    """One ``gpu`` entry of the -q tree (text or XML)."""
    retired = gpu.get("retired_pages")
    remap = gpu.get("remapped_rows")
    return GpuHealth(
        compute_mode=compute_mode(gpu.text("compute_mode")),
        mig=flag(_first(gpu, ("mig_mode", "current_mig"), ("mig_mode", "current"))),
        mig_pending=flag(_first(gpu, ("mig_mode", "pending_mig"), ("mig_mode", "pending"))),
        pcie_gen=_link(gpu, "pcie_gen", "current"),
        pcie_gen_max=_link(gpu, "pcie_gen", "max"),
        pcie_width=_link(gpu, "link_width", "current"),
        pcie_width_max=_link(gpu, "link_width", "max"),
        throttle=_throttle(gpu),
        retired_pages=_retired(retired),
        retired_pending=_any_flag(retired, "pending"),
        remap_pending=_any_flag(remap, "pending"),
        remap_failed=_any_flag(remap, "failure"),
        processes=_processes(gpu),
        fabric_state=_fabric(gpu),
    )


def _retired(entry: Entry | None) -> int | None:
    # XML counts under "retired_count"; the text prints "Single/Double Bit ECC : <n>".
    counted = _sum(entry, "retired_count")
    return counted if counted is not None else _sum(entry, "bit_ecc")


def _any_flag(entry: Entry | None, word: str) -> bool | None:
    if entry is None:
        return None
    flags = [flag(e.value) for key, e in entry.children if word in key]
    known = [f for f in flags if f is not None]
    return any(known) if known else None


# -- NVML (the probe's child) -----------------------------------------------------------------


def _value(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, dict) else None


def _nvml_processes(raw: Any) -> tuple[GpuProcess, ...] | None:
    if not isinstance(raw, list):
        return None
    out = []
    for proc in raw:
        if isinstance(proc, dict):
            name = proc.get("name")
            out.append(
                GpuProcess(
                    integer(proc.get("pid")),
                    name if isinstance(name, str) else "?",
                    size(proc.get("used_memory")),
                )
            )
    return tuple(out)


def health_from_nvml(device: dict[str, Any]) -> GpuHealth:
    """The probe child's answers for one device (each {"value": v} or {"error": e})."""
    mig = _value(device.get("mig_mode"))  # [current, pending]
    pcie = {k: integer(_value(device.get(k))) for k in ("pcie_gen", "pcie_gen_max")}
    width = {k: integer(_value(device.get(k))) for k in ("pcie_width", "pcie_width_max")}
    remap = _value(device.get("remapped_rows"))  # [corr, unc, pending, failure]
    pending = _value(device.get("retired_pending"))
    retired = [integer(_value(device.get(k))) for k in ("retired_sbe", "retired_dbe")]
    fabric = _value(device.get("fabric_state"))
    return GpuHealth(
        compute_mode=compute_mode(_value(device.get("compute_mode"))),
        mig=flag(mig[0]) if isinstance(mig, list) and mig else None,
        mig_pending=flag(mig[1]) if isinstance(mig, list) and len(mig) > 1 else None,
        pcie_gen=pcie["pcie_gen"],
        pcie_gen_max=pcie["pcie_gen_max"],
        pcie_width=width["pcie_width"],
        pcie_width_max=width["pcie_width_max"],
        throttle=throttle_names(_value(device.get("throttle"))),
        retired_pages=sum(r for r in retired if r is not None)
        if any(r is not None for r in retired)
        else None,
        retired_pending=flag(pending),
        remap_pending=flag(remap[2]) if isinstance(remap, list) and len(remap) == 4 else None,
        remap_failed=flag(remap[3]) if isinstance(remap, list) and len(remap) == 4 else None,
        processes=_nvml_processes(_value(device.get("processes"))),
        fabric_state=FABRIC_STATES.get(fabric) if isinstance(fabric, int) else None,
    )
