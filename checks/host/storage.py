"""The host a job runs on: room on the filesystems it writes to, mounts that answer, memory that
is free, no swapping, no process stuck in the kernel.

Space and answers come from a child the probe abandons when a path hangs (a stuck NFS server
never hangs the doctor); every threshold is the shipped table's (doctor/judge/thresholds.py),
overridable in doctor.toml, and each finding names the one it crossed.
"""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Severity
from doctor.core.shell import command, commands
from doctor.core.units import human_bytes
from doctor.facts.host.disk import Space
from doctor.facts.host.host import HostFacts
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import described, threshold
from doctor.plugin import Skip, need, node_check

# Filesystems full by design (read-only images) or the system's own, not a job's.
NOT_WRITTEN_FS = ("squashfs", "iso9660", "udf", "devtmpfs", "efivarfs", "proc", "sysfs")
NOT_WRITTEN = ("/boot", "/snap/", "/run", "/sys", "/proc", "/efi", "/var/lib/docker/")
MUST_WRITE = ("/tmp", "/dev/shm")  # NCCL, torch and most launchers write here


def _host(facts: NodeFacts) -> HostFacts:
    return need(facts.host, "host")


def _judged(space: Space) -> bool:
    """Whether a filesystem's room matters to a job: not a read-only image or a system mount."""
    if space.hung or space.error or not space.size:
        return False
    fstype = space.mount.fstype if space.mount else ""
    if fstype in NOT_WRITTEN_FS:
        return False
    point = space.mount.point if space.mount else space.path
    if space.path == "/dev/shm" or point == "/dev/shm":
        return True
    return not (point == "/dev" or point.startswith(NOT_WRITTEN) or point.rstrip("/") == "/boot")


def _where(space: Space, others: list[Space]) -> str:
    """ "/tmp" or "/ (also /tmp, /root)": every asked path on one filesystem, named once."""
    point = space.mount.point if space.mount else space.path
    names = [s.path for s in others if s.path != point]
    return point + (f" (also {', '.join(names)})" if names else "")


def _by_filesystem(spaces: tuple[Space, ...]) -> list[tuple[Space, list[Space]]]:
    groups: dict[str, list[Space]] = {}
    for space in spaces:
        if _judged(space):
            key = space.mount.point if space.mount else space.path
            groups.setdefault(key, []).append(space)
    return [(group[0], group) for group in groups.values()]


@node_check(
    "host.disk",
    "The filesystems jobs write to have free space and inodes",
    needs=("host",),
    codes={
        "host.disk.full": "a filesystem jobs write to is full (under host.disk_full_pct free)",
        "host.disk.low": "a filesystem jobs write to is nearly full (under host.disk_free_pct "
        "free)",
        "host.inodes.full": "a filesystem has no free inodes: no file can be created",
        "host.inodes.low": "a filesystem is nearly out of inodes (under host.inodes_free_pct)",
    },
)
def disk(facts: NodeFacts) -> Iterator[Finding]:
    spaces = need(_host(facts).spaces, "disk space")
    groups = _by_filesystem(spaces)
    if not groups:
        raise Skip("no filesystem jobs write to was measured")
    warn, full = threshold("host.disk_free_pct"), threshold("host.disk_full_pct")
    for space, group in groups:
        where = _where(space, group)
        free = space.free_pct
        if free is not None and free < warn:
            code, severity, name = (
                ("host.disk.full", Severity.FAIL, "host.disk_full_pct")
                if free < full
                else ("host.disk.low", Severity.WARN, "host.disk_free_pct")
            )
            yield Finding(
                code,
                severity,
                f"{where} has {free:.1f}% free ({human_bytes(space.avail or 0)} of "
                f"{human_bytes(space.size or 0)})",
                evidence=(
                    f"{space.path}: {human_bytes(space.avail or 0)} available of "
                    f"{human_bytes(space.size or 0)}",
                    described(name),
                ),
                fix=Fix(
                    "Free space there (old checkpoints, core dumps, caches, container images) "
                    "or point the job's output elsewhere.",
                    (command("sudo du -xh --max-depth=2 {} | sort -h | tail", space.path),),
                ),
                data={"path": space.path, "free_pct": round(free, 2), "threshold": "absolute"},
            )
        inodes = space.inodes_free_pct
        if inodes is not None and inodes < threshold("host.inodes_free_pct"):
            none_left = not space.ffree
            yield Finding(
                "host.inodes.full" if none_left else "host.inodes.low",
                Severity.FAIL if none_left else Severity.WARN,
                f"{where} has {inodes:.1f}% of its inodes free ({space.ffree} of {space.files})",
                evidence=(
                    f"{space.path}: {space.ffree} free inodes of {space.files}",
                    described("host.inodes_free_pct"),
                ),
                fix=Fix(
                    "Remove the many small files filling it (caches, extracted datasets, logs).",
                    (command("sudo du -x --inodes -d 2 {} | sort -n | tail", space.path),),
                ),
                data={"path": space.path, "free_pct": round(inodes, 2), "threshold": "absolute"},
            )


@node_check(
    "host.mounts",
    "Every path jobs use answers in time, is mounted where expected and is writable",
    needs=("host",),
    codes={
        "host.mount.hung": "a path did not answer within host.path_timeout_s: its filesystem "
        "(NFS, FUSE) hangs, and so will every job that touches it",
        "host.mount.absent": "a --mount path is not a mount point: the filesystem is not mounted "
        "and jobs would write to the disk below",
        "host.mount.missing": "a path jobs need does not exist or cannot be read",
        "host.mount.read_only": "a path jobs write to is not writable",
    },
)
def mounts(facts: NodeFacts) -> Iterator[Finding]:
    host = _host(facts)
    spaces = [s for s in need(host.spaces, "paths") if s.asked != "df"]
    if not spaces:
        raise Skip("no path was asked on the node (pasted df shows space, not answers)")
    timeout = host.path_timeout or threshold("host.path_timeout_s")
    for space in spaces:
        if space.hung:
            mount = space.mount
            what = f"{mount.fstype} from {mount.source}" if mount else "its filesystem"
            yield Finding(
                "host.mount.hung",
                Severity.FAIL,
                f"{space.path} did not answer in {timeout:g} s: {what} hangs",
                evidence=(
                    f"statvfs/access({space.path}) gave no answer",
                    described("host.path_timeout_s"),
                ),
                fix=Fix(
                    "Check the server and the network path to it; a job touching the mount hangs "
                    "in the kernel until it answers.",
                    (
                        command("timeout 5 stat -f {}", space.path),
                        command("grep -iE 'nfs|fuse' /proc/self/mountinfo"),
                    ),
                ),
            )
            continue
        needed = space.asked in ("mount", "path") or space.path in MUST_WRITE
        if space.error:
            if needed:
                yield Finding(
                    "host.mount.missing",
                    Severity.FAIL,
                    f"{space.path}: {space.error}",
                    evidence=(f"statvfs({space.path}): {space.error}",),
                    fix=Fix(
                        "Create or mount it on this node.", (command("ls -ld {}", space.path),)
                    ),
                )
            continue
        point = space.mount.point if space.mount else None
        if (
            space.asked == "mount"
            and point is not None
            and point.rstrip("/") != space.path.rstrip("/")
        ):
            yield Finding(
                "host.mount.absent",
                Severity.FAIL,
                f"{space.path} is not mounted (it is a folder on {point})",
                evidence=(f"{space.path} lies on the mount at {point}",),
                fix=Fix(
                    "Mount it (check /etc/fstab and the automounter).",
                    (command("sudo mount {}", space.path),),
                ),
            )
        if needed and space.writable is False:
            yield Finding(
                "host.mount.read_only",
                Severity.FAIL,
                f"{space.path} is not writable",
                evidence=(f"access({space.path}, W_OK) refused",)
                + ((f"mounted {','.join(space.mount.options[:3])}",) if space.mount else ()),
                fix=Fix(
                    "Remount it read-write or fix its permissions.",
                    (command("ls -ld {}", space.path),),
                ),
            )


@node_check(
    "host.memory",
    "Memory is free before the job starts, and the node is not swapping",
    needs=("host",),
    codes={
        "host.memory.low": "less memory available than host.mem_available_pct before the job",
        "host.swap.in_use": "swap in use above host.swap_used_pct of RAM: the node pages",
        "host.swap.on": "swap is on (unused): most GPU clusters run without it",
    },
)
def memory(facts: NodeFacts) -> Iterator[Finding]:
    mem = need(_host(facts).memory, "memory")
    if mem.available is not None:
        share = 100.0 * mem.available / mem.total if mem.total else 100.0
        if share < threshold("host.mem_available_pct"):
            yield Finding(
                "host.memory.low",
                Severity.WARN,
                f"only {human_bytes(mem.available)} of {human_bytes(mem.total)} memory available "
                f"({share:.0f}%)",
                evidence=(
                    f"MemAvailable {mem.available} of MemTotal {mem.total} bytes",
                    described("host.mem_available_pct"),
                ),
                fix=Fix(
                    "Find what holds it (a leftover job, a full /dev/shm, page cache pinned by a "
                    "tmpfs) before starting the job.",
                    commands("ps -eo pid,rss,comm --sort=-rss | head", "df -h /dev/shm /tmp"),
                ),
                data={"available_pct": round(share, 1), "threshold": "absolute"},
            )
    if mem.swap_total <= 0:
        return
    used = 100.0 * mem.swap_used / mem.total if mem.total else 0.0
    if used > threshold("host.swap_used_pct"):
        yield Finding(
            "host.swap.in_use",
            Severity.WARN,
            f"{human_bytes(mem.swap_used)} swapped out ({used:.0f}% of RAM): the node pages, and "
            "a job's host-side work slows with it",
            evidence=(
                f"swap used {mem.swap_used} of {mem.swap_total} bytes",
                described("host.swap_used_pct"),
            ),
            fix=Fix(
                "Free memory, or turn swap off on training nodes.", commands("sudo swapoff -a")
            ),
            data={"swap_used_pct": round(used, 1), "threshold": "absolute"},
        )
    else:
        yield Finding(
            "host.swap.on",
            Severity.INFO,
            f"swap is on ({human_bytes(mem.swap_total)}), unused",
            evidence=(f"SwapTotal {mem.swap_total} bytes",),
            fix=Fix(
                "Most GPU clusters turn it off (AzHC, NHC and imbue check that).",
                commands("sudo swapoff -a"),
            ),
        )


@node_check(
    "host.dstate",
    "No process is stuck in uninterruptible sleep (D state)",
    needs=("host",),
    codes={
        "host.dstate": "processes stayed in D state across two looks: they wait on I/O that "
        "does not come (a hung mount, a failing disk, a stuck driver)",
    },
)
def dstate(facts: NodeFacts) -> Iterator[Finding]:
    stuck = need(_host(facts).stuck, "process states")
    if not stuck:
        return
    shown = ", ".join(f"{p.comm}[{p.pid}]" for p in stuck[:6])
    yield Finding(
        "host.dstate",
        Severity.WARN,
        f"{len(stuck)} process(es) stuck in the kernel (D state): {shown}",
        evidence=(
            *tuple(f"pid {p.pid} {p.comm}: waiting in {p.wchan or '?'}" for p in stuck[:10]),
            described("host.dstate_seconds"),
        ),
        fix=Fix(
            "See what they wait on (the function, the mount); they end only when that I/O "
            "completes or the node reboots.",
            tuple(command("sudo cat /proc/{}/stack", p.pid) for p in stuck[:3]),
        ),
    )


CHECKS = [disk, mounts, memory, dstate]
