"""The NVIDIA driver: kernel module, NVML's view of it, and the CUDA driver API version."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words, marked
from doctor.facts.nvidia.smi import smi_versions

# Must match NVIDIA_MARK in doctor/stages/probe.py.
MARK = "@@cluster-doctor-nvidia@@"
PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." (proprietary) and
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  ..." (open modules).
_NVRM = re.compile(r"NVRM version:.*?(Open )?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")

KernelModule = Literal["open", "proprietary"]
NVCC = "nvcc"  # the command slot of `nvcc --version`
NO_NVCC = Missing("command 'nvcc' was not run", "unsupported")  # as Capture says
# "Cuda compilation tools, release 12.4, V12.4.99"
_NVCC = re.compile(r"Cuda compilation tools,\s*release\s+(\d+\.\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class DriverFacts:
    version: str | Missing  # NVML's, else the loaded kernel module's
    module_version: str | Missing  # the loaded kernel module (procfs or sysfs)
    kernel_module: KernelModule | None  # which flavour, when procfs says
    cuda_version: str | Missing  # the CUDA driver API version ("12.4"), from libcuda or NVML
    nvml_error: str | None  # why NVML could not start (driver not loaded, version mismatch...)
    libcuda_error: str | None  # why libcuda.so.1 could not be loaded or asked
    toolkit: str | Missing = dataclasses.field(default=NO_NVCC)  # `nvcc --version` release


def cuda_version(code: int) -> str:
    """cuDriverGetVersion's 1000*major + 10*minor → "12.4"."""
    return f"{code // 1000}.{code % 1000 // 10}"


def parse_nvrm(text: str) -> tuple[str, KernelModule] | None:
    """The version and flavour from /proc/driver/nvidia/version's NVRM line."""
    m = _NVRM.search(text)
    if m is None:
        return None
    return m.group(2), "open" if m.group(1) else "proprietary"


def nvidia_call(cap: Capture) -> dict[str, Any] | Missing:
    """The probe's NVIDIA child (libcuda + NVML) as a dict of raw results."""
    result = cap.command("nvidia")
    if isinstance(result, Missing):  # "<python>: <why>" → "NVIDIA probe child: <why>"
        return Missing(f"NVIDIA probe child: {result.reason.partition(': ')[2]}", result.kind)
    data, _ = marked(result, MARK)
    if data is not None:
        return data
    return Missing(f"the NVIDIA probe child died: {last_words(result)}", "failed")


def field(entry: Any) -> Any:
    """One {"value": v} / {"error": e} result from the child; Missing for an error."""
    if isinstance(entry, dict) and "value" in entry:
        return entry["value"]
    if isinstance(entry, dict) and "error" in entry:
        return Missing(str(entry["error"]), "failed")
    return Missing("not reported", "unsupported")


def _module(cap: Capture) -> tuple[str | Missing, KernelModule | None]:
    proc = cap.file(PROC_VERSION)
    if isinstance(proc, str):
        parsed = parse_nvrm(proc)
        if parsed:
            return parsed
    sysfs = cap.file(SYS_VERSION)
    if isinstance(sysfs, str) and sysfs.strip():
        return sysfs.strip(), None
    reason = proc.reason if isinstance(proc, Missing) else f"{PROC_VERSION} has no NVRM line"
    return Missing(f"no NVIDIA kernel module loaded ({reason})", "absent"), None


def parse_nvcc(text: str) -> str | None:
    """The CUDA toolkit release ("12.4") from `nvcc --version`."""
    m = _NVCC.search(text[: 1 << 16])
    return m.group(1) if m else None


def _toolkit(cap: Capture) -> str | Missing:
    result = cap.command(NVCC)
    if isinstance(result, Missing):
        return result
    version = parse_nvcc(result.stdout) if result.rc == 0 else None
    return version or Missing(f"nvcc --version: {last_words(result, stdout_too=True)}", "failed")


def _no_cuda(libcuda: Any) -> Missing:
    reason = libcuda.reason if isinstance(libcuda, Missing) else "no CUDA driver version reported"
    return Missing(reason, "failed")


def parse_driver(cap: Capture) -> DriverFacts | Missing:
    """Missing only when no kernel module, no NVIDIA child and no nvidia-smi report say a thing.

    NVML's answers come first; a pasted or fallback nvidia-smi report stands in for NVML (its
    "CUDA Version" is the driver API version, as NVML's is).
    """
    module_version, flavour = _module(cap)
    call = nvidia_call(cap)
    smi_driver, smi_cuda = smi_versions(cap)
    toolkit = _toolkit(cap)
    if isinstance(call, Missing) and isinstance(module_version, Missing) and smi_driver is None:
        # The child is skipped (absent) where nothing NVIDIA is on the node: say that once.
        extra = "" if call.kind == "absent" else f"; {call.reason}"
        return Missing(module_version.reason + extra, module_version.kind)
    data = call if isinstance(call, dict) else {}
    init = field(data.get("nvmlInit"))
    nvml_version = field(data.get("driver_version"))
    libcuda = field(data.get("cuDriverGetVersion"))
    cuda = libcuda if isinstance(libcuda, int) else field(data.get("cuda_driver_version"))
    version = nvml_version if isinstance(nvml_version, str) else (smi_driver or module_version)
    if isinstance(cuda, int):
        cuda_text: str | Missing = cuda_version(cuda)
    else:
        cuda_text = smi_cuda or _no_cuda(libcuda)
    return DriverFacts(
        version=version,
        module_version=module_version,
        kernel_module=flavour,
        cuda_version=cuda_text,
        nvml_error=init.reason if isinstance(init, Missing) and "nvmlInit" in data else None,
        libcuda_error=libcuda.reason if isinstance(libcuda, Missing) and data else None,
        toolkit=toolkit,
    )
