"""GPU health, as DCGM's diagnostics judge it: what will crash, hang or slow a training run.

Each check reads the GPU facts (NVML on probed nodes, nvidia-smi reports on pasted ones); a GPU
whose source did not report a field is not judged on it, and a check with nothing to judge skips
with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import Command, commands
from doctor.facts.gpu import Gpu
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

MIB = 1 << 20
# Clock-event reasons that mean the hardware is protecting itself, not an idle or capped GPU.
SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# Xid codes that point at the GPU, its memory or its links rather than at the program
# (NVIDIA's Xid catalogue): the GPU needs a reset or service before it can be trusted.
HARDWARE_XID = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
RESET = commands("nvidia-smi -r -i <gpu>   # with no process on it", "sudo reboot")
AMD_RESET = commands("sudo amd-smi reset -G -g <gpu>   # with no process on it", "sudo reboot")
AMD_PROCESSES = commands("amd-smi process", "rocm-smi --showpids")


def _commands(
    gpus: list[Gpu], nvidia: tuple[Command, ...], amd: tuple[Command, ...]
) -> tuple[Command, ...]:
    """The commands for the vendors of ``gpus``: a mixed node gets both sets."""
    vendors = {g.vendor for g in gpus}
    return (nvidia if "nvidia" in vendors else ()) + (amd if "amd" in vendors else ())


def _gpus(facts: NodeFacts, what: str, *fields: Callable[[Gpu], Any]) -> list[Gpu]:
    """The node's GPUs whose source reported any of ``fields``; skip with the reason when none
    did."""
    gpus = need(facts.gpus, "GPUs")
    known = [g for g in gpus.gpus if any(field(g) is not None for field in fields)]
    if not gpus.gpus:
        raise Skip("no GPU listed")
    if not known:
        raise Skip(f"{gpus.source} does not report {what}")
    return known


def _name(gpu: Gpu) -> str:
    return f"GPU{gpu.index} ({gpu.bus_id})"


@node_check(
    "gpu.ecc",
    "No GPU has uncorrectable ECC errors",
    needs=("gpus",),
    codes={
        "gpu.ecc.volatile": "uncorrectable ECC errors since the driver loaded: kernels fail",
        "gpu.ecc.aggregate": "uncorrectable ECC errors over the GPU's life",
    },
)
def ecc(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(
        facts,
        "ECC error counts",
        lambda g: g.ecc_uncorrected_volatile,
        lambda g: g.ecc_uncorrected_aggregate,
    )
    now = [g for g in gpus if g.ecc_uncorrected_volatile]
    if now:
        yield Finding(
            "gpu.ecc.volatile",
            Severity.FAIL,
            f"{len(now)} GPU(s) had uncorrectable ECC errors since the driver loaded: CUDA "
            "kernels on them fail with 'uncorrectable ECC error encountered' and ranks die",
            evidence=tuple(f"{_name(g)}: {g.ecc_uncorrected_volatile}" for g in now),
            fix=Fix(
                "Drain the node, reset the GPU (retires/remaps the bad memory), and replace it "
                "if errors come back.",
                _commands(now, RESET, AMD_RESET),
            ),
        )
    life = [g for g in gpus if g.ecc_uncorrected_aggregate and g not in now]
    if life:
        yield Finding(
            "gpu.ecc.aggregate",
            Severity.WARN,
            f"{len(life)} GPU(s) have had uncorrectable ECC errors in their life",
            evidence=tuple(f"{_name(g)}: {g.ecc_uncorrected_aggregate}" for g in life),
            fix=Fix(
                "Watch them; a GPU whose count grows needs replacing.",
                commands("nvidia-smi -q -d ECC"),
            ),
        )


@node_check(
    "gpu.memory_repair",
    "No GPU waits on a page retirement or row remap, and none failed one",
    needs=("gpus",),
    codes={
        "gpu.remap.failed": "a row remap failed: the GPU needs servicing",
        "gpu.remap.pending": "a row remap waits for a GPU reset",
        "gpu.retired.pending": "a page retirement waits for a driver reload",
    },
)
def memory_repair(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(
        facts,
        "row remapping or page retirement",
        lambda g: g.health.remap_pending,
        lambda g: g.health.remap_failed,
        lambda g: g.health.retired_pending,
    )
    for code, severity, attr, summary, fix in (
        (
            "gpu.remap.failed",
            Severity.FAIL,
            lambda g: g.health.remap_failed,
            "a row remap failed: memory errors will recur and kill jobs",
            Fix(
                "Take the GPU out of service and have it replaced (RMA).",
                commands("nvidia-smi -q -d ROW_REMAPPER"),
            ),
        ),
        (
            "gpu.remap.pending",
            Severity.WARN,
            lambda g: g.health.remap_pending,
            "a row remap is pending: the bad row stays in use until the GPU is reset",
            Fix("Reset the GPU (or reboot) to apply the remap.", RESET),  # NVIDIA only
        ),
        (
            "gpu.retired.pending",
            Severity.WARN,
            lambda g: g.health.retired_pending,
            "a page retirement is pending: the bad page stays in use until the driver reloads",
            Fix(
                "Reload the driver (or reset the GPU, or reboot) to retire the page.",
                _commands(gpus, RESET, AMD_RESET),
            ),
        ),
    ):
        hit = [g for g in gpus if attr(g)]
        if hit:
            yield Finding(
                code,
                severity,
                f"{len(hit)} GPU(s): {summary}",
                evidence=tuple(_name(g) for g in hit),
                fix=fix,
            )


@node_check(
    "gpu.pcie",
    "Every GPU's PCIe link runs at its full width and generation",
    needs=("gpus",),
    codes={
        "gpu.pcie.width": "a GPU's PCIe link is narrower than it can be: host↔GPU bandwidth cut",
        "gpu.pcie.gen": "a busy GPU's PCIe link runs below its generation",
    },
)
def pcie(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(facts, "PCIe link width", lambda g: g.health.pcie_width_max)
    narrow = [g for g in gpus if (g.health.pcie_width or 0) < (g.health.pcie_width_max or 0)]
    if narrow:
        yield Finding(
            "gpu.pcie.width",
            Severity.WARN,
            f"{len(narrow)} GPU(s) run a narrower PCIe link than they can: host transfers and "
            "GPUDirect RDMA through them are slower by the same factor",
            evidence=tuple(
                f"{_name(g)}: x{g.health.pcie_width} of x{g.health.pcie_width_max}" for g in narrow
            ),
            fix=Fix(
                "Reseat the GPU or its riser, check the slot's bifurcation in the BIOS.",
                commands("sudo lspci -vv -s <bus id> | grep -E 'LnkCap|LnkSta'"),
            ),
        )
    # Idle GPUs drop their link generation to save power: judge the generation only under load.
    busy = [g for g in gpus if g.health.throttle is not None and "idle" not in g.health.throttle]
    slow = [g for g in busy if (g.health.pcie_gen or 0) < (g.health.pcie_gen_max or 0)]
    if slow:
        yield Finding(
            "gpu.pcie.gen",
            Severity.WARN,
            f"{len(slow)} busy GPU(s) run their PCIe link below its generation",
            evidence=tuple(
                f"{_name(g)}: gen {g.health.pcie_gen} of {g.health.pcie_gen_max}" for g in slow
            ),
            fix=Fix(
                "Check the slot's link speed setting in the BIOS and the riser; reseat the GPU.",
                commands("nvidia-smi -q -d PCIE"),
            ),
        )


@node_check(
    "gpu.throttle",
    "No GPU is slowed by hardware protection (thermal, power brake, HW slowdown)",
    needs=("gpus",),
    codes={"gpu.throttle": "a GPU's clocks are cut by thermal or power protection"},
)
def throttle(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(facts, "clock-event reasons", lambda g: g.health.throttle)
    hit = [(g, [r for r in g.health.throttle or () if r in SLOWDOWNS]) for g in gpus]
    hit = [(g, reasons) for g, reasons in hit if reasons]
    if hit:
        yield Finding(
            "gpu.throttle",
            Severity.WARN,
            f"{len(hit)} GPU(s) slowed by hardware protection: the whole job runs at the pace "
            "of the slowest rank",
            evidence=tuple(f"{_name(g)}: {', '.join(r)}" for g, r in hit),
            fix=Fix(
                "Check cooling (fans, inlet temperature) and the power supply; HW power brake "
                "means the PSU or BMC asked the GPU to slow down.",
                commands("nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER"),
            ),
        )


@node_check(
    "gpu.modes",
    "GPUs are in persistence mode, a compute mode NCCL can use, and without MIG",
    needs=("gpus",),
    codes={
        "gpu.persistence.off": "persistence mode is off: every job start re-initialises the GPU",
        "gpu.compute_mode.blocking": "a compute mode lets no (or only one) process use the GPU",
        "gpu.compute_mode.exclusive": "exclusive-process mode: one process per GPU only",
        "gpu.mig.enabled": "MIG is on: NCCL does not communicate across MIG instances",
    },
)
def modes(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(
        facts,
        "persistence, compute or MIG mode",
        lambda g: g.persistence_mode,
        lambda g: g.health.compute_mode,
        lambda g: g.health.mig,
    )
    off = [g for g in gpus if g.persistence_mode is False]
    if off:
        yield Finding(
            "gpu.persistence.off",
            Severity.WARN,
            f"persistence mode is off on {len(off)} GPU(s): each job start pays the driver's "
            "initialisation, and ranks start seconds apart",
            evidence=tuple(_name(g) for g in off),
            fix=Fix(
                "Run the persistence daemon.",
                commands(
                    "sudo systemctl enable --now nvidia-persistenced", "sudo nvidia-smi -pm 1"
                ),
            ),
        )
    blocking = [g for g in gpus if g.health.compute_mode in ("prohibited", "exclusive_thread")]
    if blocking:
        yield Finding(
            "gpu.compute_mode.blocking",
            Severity.FAIL,
            f"{len(blocking)} GPU(s) in a compute mode that refuses CUDA contexts: ranks fail "
            "with 'all CUDA-capable devices are busy or unavailable'",
            evidence=tuple(f"{_name(g)}: {g.health.compute_mode}" for g in blocking),
            fix=Fix("Set the default compute mode.", commands("sudo nvidia-smi -c DEFAULT")),
        )
    exclusive = [g for g in gpus if g.health.compute_mode == "exclusive_process"]
    if exclusive:
        yield Finding(
            "gpu.compute_mode.exclusive",
            Severity.WARN,
            f"{len(exclusive)} GPU(s) in exclusive-process mode: a second process on the GPU "
            "(a monitor, a data-loader touching CUDA) fails to start",
            evidence=tuple(_name(g) for g in exclusive),
            fix=Fix(
                "Set the default compute mode unless a scheduler needs it.",
                commands("sudo nvidia-smi -c DEFAULT"),
            ),
        )
    mig = [g for g in gpus if g.health.mig]
    if mig:
        yield Finding(
            "gpu.mig.enabled",
            Severity.WARN,
            f"MIG is enabled on {len(mig)} GPU(s): NCCL runs only inside one MIG instance, "
            "never across instances or GPUs",
            evidence=tuple(_name(g) for g in mig),
            fix=Fix(
                "Disable MIG for multi-GPU training.",
                commands("sudo nvidia-smi -i <gpu> -mig 0", "sudo nvidia-smi -r -i <gpu>"),
            ),
        )


@node_check(
    "gpu.processes",
    "No other process holds GPU memory before training starts",
    needs=("gpus",),
    codes={"gpu.processes.other": "processes already hold memory on a GPU"},
)
def processes(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(facts, "processes", lambda g: g.health.processes)
    busy = [g for g in gpus if g.health.processes]
    if busy:
        evidence = tuple(
            f"{_name(g)}: pid {p.pid} {p.name}"
            + (f" {p.used_memory // MIB} MiB" if p.used_memory is not None else "")
            for g in busy
            for p in g.health.processes or ()
        )
        yield Finding(
            "gpu.processes.other",
            Severity.WARN,
            f"{len(busy)} GPU(s) already have processes on them: the job gets less memory "
            "(out-of-memory at start-up) and shares the GPU's time",
            evidence=evidence[:20],
            fix=Fix(
                "Find and stop leftover processes.",
                _commands(
                    busy,
                    commands(
                        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
                    ),
                    AMD_PROCESSES,
                ),
            ),
        )


@node_check(
    "gpu.xid",
    "The kernel log holds no NVIDIA Xid error",
    needs=("gpu_host",),
    codes={
        "gpu.xid.hardware": "Xid errors that point at the GPU, its memory or its links",
        "gpu.xid.other": "Xid errors, usually raised by a program (bad address, timeout)",
    },
)
def xid(facts: NodeFacts) -> Iterator[Finding]:
    host = need(facts.gpu_host, "GPU host facts")
    events = need(host.xid, "Xid events")
    hardware = [e for e in events if e.code in HARDWARE_XID]
    other = [e for e in events if e.code not in HARDWARE_XID]
    if hardware:
        codes = sorted({e.code for e in hardware})
        yield Finding(
            "gpu.xid.hardware",
            Severity.FAIL,
            "Xid " + ", ".join(f"{c} ({HARDWARE_XID[c]})" for c in codes) + " in the kernel log",
            evidence=tuple(f"{e.bus_id}: Xid {e.code} {e.detail}".strip() for e in hardware[-10:]),
            fix=Fix(
                "Drain the node; reset the GPU or reboot, and have it serviced if the Xid returns.",
                RESET,
            ),
            data={"codes": codes},
        )
    if other:
        codes = sorted({e.code for e in other})
        yield Finding(
            "gpu.xid.other",
            Severity.WARN,
            f"Xid {', '.join(map(str, codes))} in the kernel log: a program faulted on the GPU",
            evidence=tuple(f"{e.bus_id}: Xid {e.code} {e.detail}".strip() for e in other[-10:]),
            fix=Fix(
                "Look up the code in NVIDIA's Xid catalogue; one recurring on one GPU is hardware.",
                commands("sudo dmesg | grep -i xid"),
            ),
            data={"codes": codes},
        )


@node_check(
    "gpu.fabric",
    "NVSwitch systems have their fabric manager running and the GPU fabric set up",
    needs=("gpus",),
    codes={
        "gpu.fabric.not_ready": "the NVLink fabric is not set up: CUDA fails to initialise",
        "gpu.fabric.manager": "NVSwitches but no nv-fabricmanager running",
    },
)
def fabric(facts: NodeFacts) -> Iterator[Finding]:
    gpus = need(facts.gpus, "GPUs").gpus
    states = [(g, g.health.fabric_state) for g in gpus if g.health.fabric_state]
    pci = facts.pci if isinstance(facts.pci, list) else []
    switches = [d.address for d in pci if d.vendor == 0x10DE and d.pci_class >> 8 == 0x0680]
    if not switches and not any(s != "not_supported" for _, s in states):
        raise Skip("no NVSwitch seen (PCI) and no GPU reports an NVLink fabric")
    pending = [(g, s) for g, s in states if s in ("not_started", "in_progress")]
    if pending:
        yield Finding(
            "gpu.fabric.not_ready",
            Severity.FAIL,
            f"the NVLink fabric is not ready on {len(pending)} GPU(s): CUDA calls fail with "
            "'system not yet initialized' (error 802)",
            evidence=tuple(f"{_name(g)}: fabric {s}" for g, s in pending),
            fix=Fix(
                "Start the fabric manager (its version must match the driver's).",
                commands("sudo systemctl enable --now nvidia-fabricmanager"),
            ),
        )
    host = facts.gpu_host
    running = (
        None
        if isinstance(host, Missing) or isinstance(host.fabric_manager, Missing)
        else host.fabric_manager
    )
    if switches and running is False:
        yield Finding(
            "gpu.fabric.manager",
            Severity.FAIL,
            f"{len(switches)} NVSwitch(es) but no nv-fabricmanager process: GPUs cannot use NVLink",
            evidence=(f"NVSwitches: {', '.join(switches[:8])}",),
            fix=Fix(
                "Install and start the fabric manager matching the driver.",
                commands("sudo systemctl enable --now nvidia-fabricmanager"),
            ),
        )


CHECKS = [ecc, memory_repair, pcie, throttle, modes, processes, xid, fabric]
