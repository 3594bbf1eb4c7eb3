"""The kernel log: what the kernel and its drivers reported within the window (default: since
boot; ``--since``). One reader gives every check its events (doctor/facts/kernel/); a log that
could not be read (dmesg_restrict and no journal) skips every check here with the reason.

Each finding says the window it judged: a line the kernel printed before ``--since`` is not in
it, so a node healed since (a reboot, a replaced part) is judged on what happened after.
"""

from __future__ import annotations

from collections.abc import Iterator

from checks.kernel.common import DMESG, kernel_log, seen, subjects
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.kernel.events import KernelEvent
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import described, threshold
from doctor.plugin import Skip, node_check


@node_check(
    "kernel.lockup",
    "No CPU locked up and no task hung in the kernel",
    needs=("kernel",),
    codes={
        "kernel.soft_lockup": "a CPU ran kernel code without yielding for 20 s or more",
        "kernel.hard_lockup": "a CPU stopped taking interrupts (the NMI watchdog fired)",
        "kernel.hung_task": "a task waited in the kernel (D state) past hung_task_timeout_secs",
        "kernel.rcu_stall": "RCU grace periods stalled: a CPU is stuck or starved",
    },
)
def lockup(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    drain = Fix(
        "Drain the node and look at the stacks the kernel printed after these lines: a driver, "
        "a hung filesystem or failing hardware; reboot it before it runs jobs again.",
        (DMESG,),
    )
    soft, hard = log.of("soft_lockup"), log.of("hard_lockup")
    if soft:
        yield Finding(
            "kernel.soft_lockup",
            Severity.FAIL,
            f"soft lockup on {subjects(soft)}: a CPU was stuck in the kernel",
            evidence=seen(log, soft),
            fix=drain,
        )
    if hard:
        yield Finding(
            "kernel.hard_lockup",
            Severity.FAIL,
            f"hard lockup on {subjects(hard)}: a CPU stopped answering interrupts",
            evidence=seen(log, hard),
            fix=drain,
        )
    hung = log.of("hung_task")
    if hung:
        yield Finding(
            "kernel.hung_task",
            Severity.WARN,
            f"{len(hung)} task(s) blocked in the kernel for minutes: {subjects(hung)}",
            evidence=seen(log, hung),
            fix=Fix(
                "A task that waits that long waits on I/O that does not come: a hung NFS or "
                "FUSE mount, a failing disk, a stuck driver. See what it waits on.",
                (*commands("ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /D/'"), DMESG),
            ),
        )
    stalls = log.of("rcu_stall")
    if stalls:
        yield Finding(
            "kernel.rcu_stall",
            Severity.WARN,
            f"{len(stalls)} RCU stall report(s): a CPU did not pass a quiescent state in time",
            evidence=seen(log, stalls),
            fix=drain,
        )


@node_check(
    "kernel.crash",
    "The kernel did not panic or oops",
    needs=("kernel",),
    codes={
        "kernel.panic": "the kernel panicked (a previous boot's log, a console log)",
        "kernel.oops": "the kernel oopsed: a fault in kernel code killed a task; the kernel is "
        "tainted and may hold locks it will never release",
    },
)
def crash(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    panics, oopses = log.of("panic"), log.of("oops")
    if panics:
        yield Finding(
            "kernel.panic",
            Severity.FAIL,
            f"kernel panic: {panics[-1].detail}",
            evidence=seen(log, panics),
            fix=Fix(
                "Find the cause in the lines before the panic (a driver, a machine check); "
                "keep the node out until it is understood.",
                commands("journalctl -k -b -1 | tail -n 200"),
            ),
        )
    if oopses:
        yield Finding(
            "kernel.oops",
            Severity.FAIL,
            f"{len(oopses)} kernel oops(es): {oopses[0].detail}",
            evidence=seen(log, oopses),
            fix=Fix(
                "Reboot the node before it runs jobs (an oopsed kernel may keep locks held), and "
                "report the oops with the module it names.",
                (DMESG, *commands("sudo reboot")),
            ),
        )


@node_check(
    "kernel.oom",
    "The OOM killer did not kill processes for want of memory",
    needs=("kernel",),
    codes={
        "kernel.oom_kill": "the kernel ran out of memory and killed a process",
        "kernel.oom_kill.cgroup": "a container or job hit its own memory limit and the kernel "
        "killed one of its processes (the job's limit, not the node's memory)",
    },
)
def oom(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    kills = log.of("oom_kill")
    node_wide = [e for e in kills if e.severity != "cgroup"]
    limited = [e for e in kills if e.severity == "cgroup"]
    if node_wide:
        yield Finding(
            "kernel.oom_kill",
            Severity.WARN,
            f"the node ran out of memory: the OOM killer killed {subjects(node_wide)}",
            evidence=seen(log, node_wide),
            fix=Fix(
                "Find what used the memory (a leftover job, a leak, too many dataloader "
                "workers) and make sure it is gone before the next job.",
                commands("free -g", "ps -eo pid,rss,comm --sort=-rss | head"),
            ),
        )
    if limited:
        yield Finding(
            "kernel.oom_kill.cgroup",
            Severity.INFO,
            f"a memory limit (cgroup) killed {subjects(limited)}",
            evidence=seen(log, limited),
            fix=Fix("Raise the job's or container's memory limit, or use less memory."),
        )


@node_check(
    "kernel.hardware",
    "No machine check, memory error or CPU thermal throttling in the kernel log",
    needs=("kernel",),
    codes={
        "kernel.mce.fatal": "an uncorrected machine check: the CPU or memory failed",
        "kernel.mce": "machine check events were logged (corrected hardware errors)",
        "kernel.memory.ue": "an uncorrectable memory error (EDAC UE, memory failure, a fatal "
        "firmware-reported error)",
        "kernel.memory.ce": "more corrected memory errors than kernel.memory_ce_max: a DIMM "
        "is failing",
        "kernel.cpu_thermal": "a CPU ran above its thermal threshold and was throttled",
    },
)
def hardware(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    mces = log.of("mce")
    fatal = [e for e in mces if e.severity == "fatal"]
    if fatal:
        yield Finding(
            "kernel.mce.fatal",
            Severity.FAIL,
            f"uncorrected machine check on {subjects(fatal)}",
            evidence=seen(log, fatal),
            fix=Fix(
                "Drain the node and have its CPU/memory checked: decode the error with "
                "rasdaemon or mcelog.",
                commands("sudo ras-mc-ctl --errors", "sudo mcelog --client"),
            ),
        )
    corrected = [e for e in mces if e.severity != "fatal"]
    if corrected:
        yield Finding(
            "kernel.mce",
            Severity.WARN,
            f"{len(corrected)} machine check report(s): the hardware corrected errors",
            evidence=seen(log, corrected),
            fix=Fix("See what was corrected, and where.", commands("sudo ras-mc-ctl --summary")),
        )
    memory = [*log.of("memory"), *log.of("hw_error")]
    ue = [e for e in memory if e.severity in ("fatal", "nonfatal")]
    if ue:
        yield Finding(
            "kernel.memory.ue",
            Severity.FAIL,
            f"uncorrectable hardware error(s) on {subjects(ue)}",
            evidence=seen(log, ue),
            fix=Fix(
                "Drain the node and replace the DIMM the error names (EDAC's label or the "
                "firmware's record).",
                commands("sudo ras-mc-ctl --errors"),
            ),
        )
    ce = [e for e in memory if e.severity == "corrected"]
    count = sum(e.count for e in ce)
    if count > threshold("kernel.memory_ce_max"):
        yield Finding(
            "kernel.memory.ce",
            Severity.WARN,
            f"{count} corrected memory errors on {subjects(ce)}: a DIMM is wearing out",
            evidence=(*seen(log, ce), described("kernel.memory_ce_max")),
            fix=Fix(
                "Plan to replace the DIMM the errors name.",
                commands("sudo ras-mc-ctl --error-count"),
            ),
            data={"count": count, "threshold": "absolute"},
        )
    hot = log.of("cpu_thermal")
    if hot:
        yield Finding(
            "kernel.cpu_thermal",
            Severity.WARN,
            f"CPU thermal throttling on {subjects(hot)}: the node runs slower than its peers",
            evidence=seen(log, hot),
            fix=Fix(
                "Check the node's cooling (fans, airflow, heatsink) and its temperatures.",
                commands("sensors"),
            ),
        )


@node_check(
    "kernel.nfs",
    "Every NFS server answers, and no file handle went stale",
    needs=("kernel",),
    codes={
        "kernel.nfs.not_responding": "an NFS server stopped answering and has not come back: "
        "every access to its mounts hangs",
        "kernel.nfs.recovered": "an NFS server stopped answering for a while, then came back",
        "kernel.nfs.stale": "the NFS server changed a file under the client: stale file handles",
    },
)
def nfs(facts: NodeFacts) -> Iterator[Finding]:
    log = kernel_log(facts)
    events = log.of("nfs_down", "nfs_ok", "nfs_stale")
    mounts = facts.host.nfs_mounts if not isinstance(facts.host, Missing) else ()
    if not events and not mounts:
        raise Skip("no NFS mount and no NFS message in the kernel log")
    last: dict[str, KernelEvent] = {}
    for e in events:
        if e.kind in ("nfs_down", "nfs_ok"):
            last[e.subject] = e
    down = [e for e in last.values() if e.kind == "nfs_down"]
    came_back = {s for s, e in last.items() if e.kind == "nfs_ok"}
    flapped = [e for e in log.of("nfs_down") if e.subject in came_back]
    if down:
        servers = sorted({e.subject for e in down})
        yield Finding(
            "kernel.nfs.not_responding",
            Severity.FAIL,
            f"NFS server {', '.join(servers)} not responding (no 'OK' since): its mounts hang",
            evidence=seen(log, down),
            fix=Fix(
                "Check the server and the network path to it; jobs reading from it hang until "
                "it answers.",
                tuple(command("ping -c 3 {}", s) for s in servers[:4]),
            ),
        )
    if flapped:
        yield Finding(
            "kernel.nfs.recovered",
            Severity.WARN,
            f"NFS server {subjects(flapped)} stopped answering for a while (it is back)",
            evidence=seen(log, flapped),
            fix=Fix("Check the server's load and the network path if it recurs."),
        )
    stale = log.of("nfs_stale")
    if stale:
        yield Finding(
            "kernel.nfs.stale",
            Severity.WARN,
            f"{len(stale)} stale NFS file handle report(s)"
            + (f" from {subjects(stale)}" if any(e.subject for e in stale) else ""),
            evidence=seen(log, stale),
            fix=Fix(
                "Files were replaced on the server under the client (another client, an "
                "export re-created): remount the share on this node.",
                commands("sudo umount -l <mount> && sudo mount <mount>"),
            ),
        )


CHECKS = [lockup, crash, oom, hardware, nfs]
