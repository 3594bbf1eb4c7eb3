"""What the kernel log says went wrong: one event per line that reports a fault.

Each pattern is written from the format string that prints it (the file named beside it, in
torvalds/linux unless said otherwise), with its variable parts generalised and the older and newer
wordings of the same report side by side. A line is tried against the patterns in order and
gives at most one event; lines that only continue a report (an SXid's "Severity"/"Data" lines,
a hung task's stack) give none.

NVIDIA's Xid reports are read from the same lines by doctor/facts/nvidia/gpu_host.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from doctor.facts.kernel.lines import KernelLine

MAX_DETAIL = 300
# Every pattern below (and NVIDIA's Xid) holds one of these words, in any case: the probe keeps
# only lines with one (the controller hands it the words in its spec: doctor/pipeline/steps.py),
# and a paste opens a kernel log on one.
WORDS = (
    "xid",
    "lockup",
    "blocked for more than",
    "stall",
    "panic",
    "oops",
    "bug:",
    "bug at",
    "protection fault",
    "out of memory",
    "killed process",
    "kill process",
    "health",
    "fatal",
    "unrecoverable",
    "timeout",
    "insufficient power",
    "temperature",
    "module event",
    "admin cmd",
    "admin queue",
    "reset indication",
    "isn't ready",
    "failed to process command",
    "machine check",
    "hardware error",
    "edac",
    "memory failure",
    "aer",
    "pcie bus error",
    "not responding",
    "server ",
    "stale",
    "fileid changed",
)
HAS_WORD = re.compile("|".join(re.escape(w) for w in WORDS), re.I)


@dataclass(frozen=True)
class KernelEvent:
    kind: str  # "sxid", "soft_lockup", "oom_kill", "aer", ... (KINDS)
    subject: str  # what it is about: a device, a CPU, a task, a server
    severity: str  # the report's own grading where it has one: fatal, nonfatal, corrected
    detail: str  # the rest of what the line says, for the finding's evidence
    count: int = 1  # errors the line reports ("EDAC MC0: 3 CE ...")
    stamp: float | None = None  # seconds since boot, where the line says


# The device a driver message names: "mlx5_core 0000:5c:00.0: ...", "efa 0000:10:1b.0: ...",
# "infiniband rdmap16s27: ...", "pcieport 0000:00:01.0: ..." (dev_printk's "driver device: ").
# netdev_printk puts the interface after the device: "mlx5_core 0000:0c:00.0 ibp12s0: ...".
_DEVICE = re.compile(
    r"^(?P<driver>[\w-]{2,32}) (?P<device>[\w.:-]{1,63}[\w.-])(?: [\w.-]{1,32})?: "
)


def _device(text: str) -> str:
    m = _DEVICE.match(text)
    return m.group("device") if m else ""


Build = Callable[[re.Match[str], str], "KernelEvent | None"]


def _sxid(m: re.Match[str], text: str) -> KernelEvent | None:
    # src/common/nvswitch/kernel/inc/common_nvswitch.h NVSWITCH_PRINT_SXID: "nvidia-%s: SXid
    # (PCI:%04x:%02x:%02x.%x): %05d, " then the report; intr_nvswitch.h and error_nvswitch.h
    # open it with "Fatal, ", "Non-fatal, " or "Correctable, ". error_nvswitch.c follows each
    # report with "Severity %d Engine instance ..." and "Data {...}" lines of the same SXid.
    rest = m.group("rest").strip()
    if rest.startswith(("Severity ", "Data {")):
        return None
    word = rest.split(",", 1)[0].strip().lower()
    severity = {"fatal": "fatal", "correctable": "corrected"}.get(word, "nonfatal")
    switch = m.group("switch") or "nvswitch"
    return KernelEvent(
        "sxid",
        f"{switch} {m.group('bus').lower()}",
        severity,
        f"SXid {int(m.group('code'))}: {rest}",
    )


def _soft_lockup(m: re.Match[str], text: str) -> KernelEvent:
    return KernelEvent(
        "soft_lockup",
        f"CPU#{m.group('cpu')}",
        "",
        f"stuck for {m.group('secs')}s running {m.group('task')}:{m.group('pid')}",
    )


def _hung(m: re.Match[str], text: str) -> KernelEvent:
    task = f"{m.group('task')}:{m.group('pid')}"
    return KernelEvent("hung_task", task, "", f"blocked for more than {m.group('secs')} s")


def _oom(m: re.Match[str], text: str) -> KernelEvent:
    scope = m.group("scope") or ""
    severity = "cgroup" if scope.startswith("Memory cgroup") else "global"
    return KernelEvent("oom_kill", f"{m.group('task')} (pid {m.group('pid')})", severity, text)


def _health(m: re.Match[str], text: str) -> KernelEvent:
    # mlx5 health.c print_health_info: "Health issue observed, %s, severity(%d) %s:", its
    # severity a syslog level; ERR (3) and worse are the firmware's own fatal errors.
    level = int(m.group("level"))
    return KernelEvent("nic_fatal" if level <= 3 else "nic_warning", _device(text), "", text)


def _mce_bank(m: re.Match[str], text: str) -> KernelEvent:
    # arch/x86/kernel/cpu/mce: "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx", the last the
    # bank's MCi_STATUS: bit 61 (UC) set is an uncorrected error.
    status = int(m.group("status"), 16)
    fatal = bool(m.group("exception")) or bool(status >> 61 & 1)
    return KernelEvent("mce", f"CPU {m.group('cpu')}", "fatal" if fatal else "corrected", text)


def _edac(m: re.Match[str], text: str) -> KernelEvent:
    # drivers/edac/edac_mc.c: "EDAC MC%d: %d CE %s..." / "%d UE ..."; older "EDAC MC0: CE page".
    ue = m.group("kind") == "UE"
    count = int(m.group("n") or 1)
    return KernelEvent(
        "memory", f"MC{m.group('mc')}", "fatal" if ue else "corrected", text, count=count
    )


def _ghes(m: re.Match[str], text: str) -> KernelEvent | None:
    # drivers/firmware/efi/cper.c / drivers/acpi/apei/ghes.c: "[Hardware Error]: event
    # severity: %s" (recoverable, fatal, corrected, info).
    word = m.group("sev").lower()
    severity = {"fatal": "fatal", "recoverable": "nonfatal", "corrected": "corrected"}.get(word)
    return None if severity is None else KernelEvent("hw_error", "firmware", severity, text)


def _aer(m: re.Match[str], text: str) -> KernelEvent:
    # drivers/pci/pcie/aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)",
    # severity "Corrected"/"Correctable", "Uncorrected"/"Uncorrectable (Non-Fatal)", "(Fatal)".
    word = m.group("sev").lower()
    severity = "fatal" if "(fatal)" in word else "nonfatal" if "non-fatal" in word else "corrected"
    return KernelEvent("aer", _device(text) or "?", severity, text)


def _aer_report(m: re.Match[str], text: str) -> KernelEvent:
    # drivers/pci/pcie/aer.c: the port's report of an error a device below it sent, before
    # aer_print_error's lines for it (which may not follow: the device gone, its config space
    # unreadable). Its subject is the device the error came from, else (4.x kernels give its
    # bus number as "id=0010") the port.
    severity = "fatal" if m.group("sev") == "Fatal" else "nonfatal"
    source = m.group("source") or _device(text) or "?"
    return KernelEvent("aer_report", source.lower(), severity, text)


def _nfs(kind: str) -> Build:
    def build(m: re.Match[str], text: str) -> KernelEvent:
        server = m.groupdict().get("server") or ""
        return KernelEvent(kind, server.rstrip(".:"), "", text)

    return build


def _simple(kind: str, severity: str = "", subject: str = "", named: str = "") -> Build:
    """An event whose subject is ``subject``, else ``named`` + the pattern's subject group, else
    the device the driver's prefix names."""

    def build(m: re.Match[str], text: str) -> KernelEvent:
        group = m.groupdict().get("subject")
        about = subject or (named + group if group else "") or _device(text)
        return KernelEvent(kind, about, severity, text)

    return build


_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"
# (kind, regex, build). Kept as source: re compiles each the first time a line reaches it and
# keeps it (its own cache), so a command that reads no kernel log pays nothing for them.
PATTERNS: tuple[tuple[str, str, Build], ...] = tuple(
    (kind, regex, build)
    for kind, regex, build in (
        (
            "sxid",
            rf"(?:nvidia-(?P<switch>nvswitch\d+): )?SXid \((?:PCI:)?(?P<bus>{_BUS})\)"
            r"\s*:?\s*(?P<code>\d+)\s*,\s*(?P<rest>.*)$",
            _sxid,
        ),
        # kernel/watchdog.c: "BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"
        (
            "soft_lockup",
            r"soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<secs>\d+)s! "
            r"\[(?P<task>.*):(?P<pid>\d+)\]",
            _soft_lockup,
        ),
        # kernel/watchdog.c (watchdog_hld.c before 6.7): "Watchdog detected hard LOCKUP on cpu %d"
        (
            "hard_lockup",
            r"Watchdog detected hard LOCKUP on cpu (?P<subject>\d+)",
            _simple("hard_lockup", named="CPU#"),
        ),
        # kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds."
        (
            "hung_task",
            r"task (?P<task>.+):(?P<pid>\d+) blocked for more than (?P<secs>\d+) seconds",
            _hung,
        ),
        # kernel/rcu/tree_stall.h: "%s detected stalls on CPUs/tasks:", "%s self-detected stall
        # on CPU", "INFO: %s detected expedited stalls on CPUs/tasks:"
        (
            "rcu_stall",
            r"\b(?:rcu_\w+|rcu) (?:self-)?detected (?:expedited )?stalls? on CPU",
            _simple("rcu_stall", subject="RCU"),
        ),
        # kernel/panic.c: "Kernel panic - not syncing: %s"
        ("panic", r"Kernel panic - not syncing", _simple("panic", "fatal", "kernel")),
        # arch/*/kernel/traps.c, dumpstack.c die(): the header carries the die counter "[#%d]":
        # "Oops: 0002 [#1] SMP", "general protection fault: 0000 [#1]", arm64 "Internal error:
        # Oops: 96000004 [#1]"; arch/x86/mm/fault.c "BUG: unable to handle page fault for
        # address", "BUG: kernel NULL pointer dereference"; include/asm-generic/bug.h
        # "kernel BUG at %s:%u!". A program's own fault ("traps: python[12] general protection
        # fault ip:...") has no die counter and is not the kernel's.
        (
            "oops",
            r"(?:\b(?:Oops|general protection fault|Internal error)\b.*\[#\d+\]"
            r"|BUG: (?:unable to handle|kernel NULL pointer dereference)|kernel BUG at \S+)",
            _simple("oops", "fatal", "kernel"),
        ),
        # mm/oom_kill.c __oom_kill_process: "%s: Killed process %d (%s) total-vm:..." with
        # "Out of memory" or "Memory cgroup out of memory"; before 5.1 "%s: Kill process %d (%s)
        # score %u or sacrifice child" and then "Killed process %d (%s) total-vm:...".
        (
            "oom_kill",
            r"(?:(?P<scope>Out of memory|Memory cgroup out of memory)(?: \([\w ]+\))?: )?"
            r"Kill(?:ed)? process (?P<pid>\d+) \((?P<task>[^)]*)\)",
            _oom,
        ),
        # drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health, print_health_info,
        # mlx5_health_try_recover; events.c; cmd.c.
        # (Before the words it names: "Health issue observed, unrecoverable hardware error,
        # severity(4) WARNING" is graded by its severity.)
        (
            "nic_fatal",
            r"Health issue observed, [^,]*, severity\((?P<level>\d+)\)",
            _health,
        ),
        ("nic_fatal", r"device's health compromised", _simple("nic_fatal")),
        ("nic_fatal", r"Fatal error \d+ detected", _simple("nic_fatal")),
        ("nic_fatal", r"health recovery (?:flow aborted|failed)", _simple("nic_fatal")),
        ("nic_fatal", r"PCI slot is unavailable", _simple("nic_fatal")),
        ("nic_fatal", r"unrecoverable hardware error", _simple("nic_fatal")),
        (
            "nic_timeout",
            r"\btimeout\. Will cause a leak of a command resource"
            r"|canceled on out of queue timeout|\) No done completion",
            _simple("nic_timeout"),
        ),
        ("nic_power", r"Detected insufficient power on the PCIe slot", _simple("nic_power")),
        (
            "nic_temperature",
            r"High temperature on sensors|Port module event\[error\]: .*High Temperature",
            _simple("nic_temperature"),
        ),
        ("nic_module", r"Port module event\[error\]: module \d+", _simple("nic_module")),
        # drivers/infiniband/hw/efa/efa_com.c (the same words in ENA's ena_com.c): admin queue
        # commands that never completed, a closed queue, a reset that did not take.
        (
            "nic_timeout",
            r"didn't send any completion for admin cmd|didn't receive any MSI-X interrupt for "
            r"admin cmd|Wait for completion \(polling\) timeout",
            _simple("nic_timeout"),
        ),
        (
            "nic_fatal",
            r"Admin queue is closed|Reset indication didn't turn (?:on|off)"
            r"|Device isn't ready, (?:can't reset device|abort com init)",
            _simple("nic_fatal"),
        ),
        # arch/x86/kernel/cpu/mce/core.c: "[Hardware Error]: CPU %d: Machine Check%s: %Lx Bank
        # %d: %016Lx", "Machine check events logged", panic "Fatal machine check".
        (
            "mce",
            r"CPU (?P<cpu>\d+): Machine Check(?P<exception> Exception)?: [0-9a-fA-F]+ Bank \d+: "
            r"(?P<status>[0-9a-fA-F]{1,16})\b",
            _mce_bank,
        ),
        (
            "mce",
            r"Fatal machine check|Machine check: Processor context corrupt",
            _simple("mce", "fatal", "CPU"),
        ),
        ("mce", r"Machine check events logged", _simple("mce", "corrected", "CPU")),
        # arch/x86/kernel/cpu/mce/therm_throt.c: "CPU%d: %s temperature above threshold, cpu
        # clock throttled" (5.8+: "temperature is above threshold, cpu clock is throttled").
        (
            "cpu_thermal",
            r"CPU(?P<subject>\d+): (?:Core|Package) temperature (?:is )?above threshold, cpu clock "
            r"(?:is )?throttled",
            _simple("cpu_thermal", named="CPU"),
        ),
        (
            "memory",
            r"EDAC (?:\S+ )?MC(?P<mc>\d+): (?:(?P<n>\d+) )?(?P<kind>CE|UE)\b",
            _edac,
        ),
        # mm/memory-failure.c: "Memory failure: %#lx: recovery action for %s: %s";
        # arch/x86/kernel/cpu/mce/core.c kill_me_maybe: "Uncorrected hardware memory error in
        # user-access at %llx".
        (
            "memory",
            r"Memory failure: (?:0x)?[0-9a-fA-F]+: |Uncorrected hardware memory error",
            _simple("memory", "fatal", "RAM"),
        ),
        ("hw_error", r"\[Hardware Error\]: event severity: (?P<sev>\w+)", _ghes),
        (
            "aer",
            r"PCIe Bus Error: severity=(?P<sev>(?:Un)?[Cc]orrect\w*(?: \((?:Non-)?Fatal\))?)",
            _aer,
        ),
        # drivers/pci/pcie/aer.c, the port's report of an uncorrected error: before 5.3
        # "AER: %s%s error received: %04x:%02x:%02x.%d" ("Multiple ", "Uncorrected (Fatal)"),
        # then "AER: %s%s error received: %s" and, since 6.x, "... error message received from
        # %s". Corrected ones are counted from aer_print_error's lines alone.
        (
            "aer_report",
            r"AER: (?:Multiple )?Uncorrect(?:ed|able) \((?P<sev>Fatal|Non-Fatal)\) error "
            rf"(?:message )?received(?::| from) (?:(?P<source>{_BUS})|id=[0-9a-fA-F]+)",
            _aer_report,
        ),
        # net/sunrpc/clnt.c: "%s: server %s not responding, still trying" / ", timed out";
        # "%s: server %s OK"; %s the RPC program: nfs, lockd, mount, rpcbind.
        (
            "nfs_down",
            r"\b(?:nfs\w*|lockd|nlockmgr|mount|rpcbind|portmap): server (?P<server>\S+) not "
            r"responding",
            _nfs("nfs_down"),
        ),
        (
            "nfs_ok",
            r"\b(?:nfs\w*|lockd|nlockmgr|mount|rpcbind|portmap): server (?P<server>\S+) OK\b",
            _nfs("nfs_ok"),
        ),
        # fs/nfs/inode.c nfs_update_inode: "NFS: server %s error: fileid changed" (then ESTALE).
        ("nfs_stale", r"NFS: server (?P<server>\S+) error: fileid changed", _nfs("nfs_stale")),
        ("nfs_stale", r"[Ss]tale (?:NFS )?file handle", _nfs("nfs_stale")),
    )
)
KINDS = tuple(dict.fromkeys(kind for kind, _, _ in PATTERNS))


def event_of(line: KernelLine) -> KernelEvent | None:
    """The event one kernel line reports, or None."""
    text = line.text
    for _kind, pattern, build in PATTERNS:
        m = re.search(pattern, text)
        if m:
            event = build(m, text)
            if event is None:
                return None
            detail = event.detail[:MAX_DETAIL]
            return KernelEvent(
                event.kind, event.subject, event.severity, detail, event.count, line.stamp
            )
    return None
