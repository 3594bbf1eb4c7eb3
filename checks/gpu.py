"""The NVIDIA driver is there and usable wherever NVIDIA GPUs sit on the PCI bus."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import commands
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

MISSING_FIX = Fix(
    "Install the NVIDIA driver and load its kernel module (dmesg says why it did not load); "
    "in a container, start it with the NVIDIA Container Toolkit so the driver is passed in.",
    commands(
        "sudo modprobe nvidia && nvidia-smi",
        "sudo dmesg | grep -iE 'nvrm|nvidia' | tail",
        "docker run --gpus all ...",
    ),
)
MISMATCH_FIX = Fix(
    "The loaded kernel module and the user-space driver libraries are different versions "
    "(usually a driver upgrade without a reboot): reboot, or reload the module.",
    commands(
        "cat /proc/driver/nvidia/version",
        "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
    ),
)
LIBS_FIX = Fix(
    "The kernel module is loaded but the user-space driver (libcuda.so.1, libnvidia-ml.so.1) "
    "cannot be used here: install the driver's user-space package matching the module, or in a "
    "container pass the driver in with the NVIDIA Container Toolkit.",
    commands("ldconfig -p | grep -E 'libcuda|libnvidia-ml'", "docker run --gpus all ..."),
)


def _mismatch(error: str | None) -> bool:
    # NVML_ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch".
    return bool(error) and "mismatch" in str(error).lower()


@node_check(
    "gpu.driver",
    "The NVIDIA driver is loaded and usable where NVIDIA GPUs are on the PCI bus",
    needs=("pci",),
    codes={
        "driver.missing": "NVIDIA GPUs are on the PCI bus but no NVIDIA driver is loaded",
        "driver.unloadable": "the NVIDIA driver is loaded but NVML or libcuda cannot use it",
    },
)
def gpu_driver(facts: NodeFacts) -> Iterator[Finding]:
    gpus = [d for d in need(facts.pci) if d.is_nvidia_gpu]
    if not gpus:
        raise Skip("no NVIDIA GPU on the PCI bus")
    on_bus = f"{len(gpus)} NVIDIA GPU(s) on the PCI bus ({', '.join(d.address for d in gpus)})"
    bound = sorted({d.driver or "none" for d in gpus})
    driver = facts.driver
    if isinstance(driver, Missing) or isinstance(driver.module_version, Missing):
        reason = driver.reason if isinstance(driver, Missing) else driver.version
        yield Finding(
            "driver.missing",
            Severity.FAIL,
            f"{len(gpus)} NVIDIA GPU(s) but no NVIDIA driver loaded",
            evidence=(on_bus, f"kernel driver bound to them: {', '.join(bound)}", str(reason)),
            fix=MISSING_FIX,
        )
        return
    broken = [
        (who, err)
        for who, err in (("NVML", driver.nvml_error), ("libcuda", driver.libcuda_error))
        if err
    ]
    if not broken:
        return
    module = f"kernel module: {driver.module_version} ({driver.kernel_module or 'flavour unknown'})"
    yield Finding(
        "driver.unloadable",
        Severity.FAIL,
        f"NVIDIA driver {driver.module_version} is loaded but "
        + " and ".join(f"{who} fails ({err})" for who, err in broken),
        evidence=(on_bus, module, *(f"{who}: {err}" for who, err in broken)),
        fix=MISMATCH_FIX if any(_mismatch(err) for _, err in broken) else LIBS_FIX,
        data={"module_version": str(driver.module_version)},
    )


CHECKS = [gpu_driver]
