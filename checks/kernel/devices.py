"""The kernel log on the node's devices: NVSwitch SXids, the RDMA NICs' drivers (mlx5, efa), PCIe
errors (AER). The reader and the window are checks/kernel.py's.
"""

from __future__ import annotations

from collections.abc import Iterator

from checks.kernel.common import DMESG, kernel_log, seen, subjects
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import described, threshold
from doctor.plugin import Skip, node_check

NVIDIA = 0x10DE
BRIDGE_OTHER = 0x0680  # PCI class of an NVSwitch (bridge, other)


@node_check(
    "gpu.sxid",
    "The kernel log holds no NVSwitch SXid error",
    needs=("kernel",),
    codes={
        "gpu.sxid.fatal": "a fatal SXid: an NVSwitch or its links failed; NVLink traffic through "
        "it stops",
        "gpu.sxid.nonfatal": "a non-fatal SXid: an NVSwitch link reported an uncorrectable error",
    },
)
def sxid(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    events = log.of("sxid")
    pci = facts.pci if isinstance(facts.pci, list) else []
    switches = [d for d in pci if d.vendor == NVIDIA and d.pci_class >> 8 == BRIDGE_OTHER]
    if not events and not switches:
        raise Skip("no NVSwitch on PCI and no SXid in the kernel log")
    fatal = [e for e in events if e.severity == "fatal"]
    nonfatal = [e for e in events if e.severity == "nonfatal"]
    fix = Fix(
        "Drain the node: stop its jobs, then reset the GPUs and NVSwitches (a reboot does both) "
        "and restart the fabric manager; have it serviced if the SXid returns.",
        commands("sudo systemctl restart nvidia-fabricmanager", "sudo reboot"),
    )
    if fatal:
        yield Finding(
            "gpu.sxid.fatal",
            Severity.FAIL,
            f"{len(fatal)} fatal NVSwitch SXid(s) on {subjects(fatal)}: NVLink through the "
            "switch is down until it is reset",
            evidence=seen(log, fatal),
            fix=fix,
            data={"codes": sorted({e.detail.split(":")[0] for e in fatal})},
        )
    if nonfatal:
        yield Finding(
            "gpu.sxid.nonfatal",
            Severity.WARN,
            f"{len(nonfatal)} non-fatal NVSwitch SXid(s) on {subjects(nonfatal)}",
            evidence=seen(log, nonfatal),
            fix=Fix(
                "Watch the switch: non-fatal SXids that recur on one link precede fatal ones; "
                "compare with NVIDIA's SXid catalogue.",
                commands("sudo dmesg -T | grep -i sxid | tail -n 50"),
            ),
        )


NIC_SUMMARY = {
    "nic_fatal": ("kernel.nic.fatal", Severity.FAIL, "the NIC's firmware or device failed"),
    "nic_warning": (
        "kernel.nic.health",
        Severity.WARN,
        "the NIC's firmware reported a health issue",
    ),
    "nic_timeout": (
        "kernel.nic.cmd_timeout",
        Severity.WARN,
        "commands to the NIC's firmware timed out",
    ),
    "nic_power": ("kernel.nic.power", Severity.WARN, "the NIC reports too little slot power"),
    "nic_temperature": ("kernel.nic.temperature", Severity.WARN, "the NIC or its module runs hot"),
    "nic_module": (
        "kernel.nic.module",
        Severity.WARN,
        "a NIC's cable or transceiver module failed",
    ),
}


@node_check(
    "kernel.nic",
    "The RDMA NICs' drivers (mlx5, efa) report no firmware, command or hardware errors",
    needs=("kernel",),
    codes={
        "kernel.nic.fatal": "mlx5/efa health failure (health poll missed, fatal syndrome, "
        "unrecoverable error, reset failed): the NIC is down or about to be",
        "kernel.nic.health": "the mlx5 firmware reported a health issue of warning severity",
        "kernel.nic.cmd_timeout": "firmware commands timed out (mlx5 command leak, efa admin "
        "queue): the NIC's firmware is hung",
        "kernel.nic.power": "the NIC reports insufficient PCIe slot power and throttles",
        "kernel.nic.temperature": "the NIC's ASIC or a transceiver module is over temperature",
        "kernel.nic.module": "a transceiver module or cable error (bad cable, power budget)",
    },
)
def nic(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    rdma = facts.rdma
    events = log.of(*NIC_SUMMARY)
    if not events and (isinstance(rdma, Missing) or not rdma.present):
        raise Skip("no RDMA device and no mlx5/efa error in the kernel log")
    for kind, (code, severity, what) in NIC_SUMMARY.items():
        found = log.of(kind)
        if not found:
            continue
        devices = sorted({e.subject for e in found if e.subject})
        yield Finding(
            code,
            severity,
            f"{what}: {subjects(found)}",
            evidence=seen(log, found),
            fix=Fix(
                "Drain the node and check the NIC: its firmware log and health reporter, the "
                "cable and module, the slot; a firmware reset or a reboot clears a hung firmware.",
                tuple(command("devlink health show {}", f"pci/{d}") for d in devices[:4])
                or (DMESG,),
            ),
        )


@node_check(
    "kernel.pcie",
    "No PCIe errors (AER) in the kernel log",
    needs=("kernel",),
    codes={
        "kernel.aer.fatal": "a fatal uncorrectable PCIe error: the link went down",
        "kernel.aer.nonfatal": "a non-fatal uncorrectable PCIe error: transactions were lost",
        "kernel.aer.corrected": "more corrected PCIe errors than kernel.aer_corrected_max: a "
        "marginal link (slot, riser, retimer)",
    },
)
def pcie(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    errors = log.of("aer")
    printed = {(e.subject, e.severity) for e in errors}
    # A port's report of an uncorrected error stands for it where the device's own lines for it
    # are missing (and only then: the same error is not counted twice).
    errors += [e for e in log.of("aer_report") if (e.subject, e.severity) not in printed]
    reseat = Fix(
        "Drain the node and check the device and the slot (reseat, riser, cable); the device "
        "the error names sits below the port that reported it.",
        tuple(
            command("sudo lspci -vvv -s {} | grep -iE 'LnkSta|UESta|CESta'", d)
            for d in sorted({e.subject for e in errors if e.subject != "?"})[:4]
        )
        or commands("sudo lspci -vvv | grep -iE 'LnkSta|UESta|CESta'"),
    )
    for severity, code, level, what in (
        ("fatal", "kernel.aer.fatal", Severity.FAIL, "fatal"),
        ("nonfatal", "kernel.aer.nonfatal", Severity.WARN, "non-fatal uncorrectable"),
    ):
        found = [e for e in errors if e.severity == severity]
        if found:
            yield Finding(
                code,
                level,
                f"{len(found)} {what} PCIe error(s) on {subjects(found)}",
                evidence=seen(log, found),
                fix=reseat,
            )
    corrected = [e for e in errors if e.severity == "corrected"]
    if len(corrected) > threshold("kernel.aer_corrected_max"):
        yield Finding(
            "kernel.aer.corrected",
            Severity.WARN,
            f"{len(corrected)} corrected PCIe errors on {subjects(corrected)}",
            evidence=(*seen(log, corrected), described("kernel.aer_corrected_max")),
            fix=reseat,
            data={"count": len(corrected), "threshold": "absolute"},
        )


CHECKS = [sxid, nic, pcie]
