"""OS, kernel, Python, identity, CPUs, NUMA and container facts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing


@dataclass(frozen=True)
class SystemFacts:
    hostname: str
    os_name: str | Missing
    kernel: str
    arch: str
    python: str
    python_executable: str
    boot_id: str | Missing
    cpus: int
    numa_nodes: tuple[int, ...] | Missing
    container: str | None  # "docker", "podman", "kubernetes", "lxc", ... or None on bare metal
    clock: float  # the node's time.time() when probed, for clock-skew checks
    # When the controller asked for the capture and when it arrived, on its own clock: the node's
    # clock agrees with it if `clock` lies between them. None where the capture does not say (a
    # pasted output, a capture saved before the span was kept).
    asked: tuple[float, float] | None = None


CPU_LIST_PART = re.compile(r"\s*(\d{1,6})(?:-(\d{1,6}))?\s*")
MAX_CPU_LIST = 1 << 16  # far above the kernel's NR_CPUS (8192) and MAX_NUMNODES (1024)


def parse_cpu_list(text: str) -> tuple[int, ...] | Missing:
    """Expand the kernel's cpulist format ("0-3,8,10-11") into numbers; Missing for text that
    is not one (a damaged capture), never an unbounded range."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        m = CPU_LIST_PART.fullmatch(part)
        lo, hi = (int(m[1]), int(m[2] or m[1])) if m else (1, 0)
        if hi < lo or len(out) + hi - lo >= MAX_CPU_LIST:
            return Missing(f"not a cpulist: {text[:40]!r}", "failed")
        out.extend(range(lo, hi + 1))
    return tuple(out)


def parse_os_release(text: str) -> str | Missing:
    fields = {}
    for line in text.splitlines():
        key, sep, val = line.partition("=")
        if sep:
            fields[key.strip()] = val.strip().strip('"')
    name = fields.get("PRETTY_NAME") or " ".join(
        v for v in (fields.get("NAME"), fields.get("VERSION_ID")) if v
    )
    return name or Missing("/etc/os-release has no NAME", "failed")


def detect_container(cap: Capture) -> str | None:
    """Which container runtime this node runs in, from the markers runtimes leave."""
    env = cap.value("env:container")
    if isinstance(env, str) and env:
        return env
    if cap.value("exists:/.dockerenv") is True:
        return "docker"
    if cap.value("exists:/run/.containerenv") is True:
        return "podman"
    cgroup = cap.file("/proc/1/cgroup")
    if isinstance(cgroup, str):
        for marker in ("kubepods", "docker", "containerd", "lxc"):
            if marker in cgroup:
                return "kubernetes" if marker == "kubepods" else marker
    env_vars = cap.value("env")
    if isinstance(env_vars, dict) and "KUBERNETES_SERVICE_HOST" in env_vars:
        return "kubernetes"
    return None


def parse_system(cap: Capture) -> SystemFacts | Missing:
    uname = cap.value("uname")
    if isinstance(uname, Missing) and isinstance(cap.value("hostname"), Missing):
        return uname  # nothing about the system was captured (a paste of other outputs)
    python = cap.value("python")
    os_release = cap.file("/etc/os-release")
    boot_id = cap.file("/proc/sys/kernel/random/boot_id")
    numa = cap.file("/sys/devices/system/node/online")
    hostname = cap.value("hostname")
    return SystemFacts(
        hostname=hostname if isinstance(hostname, str) else "?",
        os_name=parse_os_release(os_release) if isinstance(os_release, str) else os_release,
        kernel=uname[2] if isinstance(uname, list) else "?",
        arch=uname[4] if isinstance(uname, list) else "?",
        python=python["version"] if isinstance(python, dict) else "?",
        python_executable=python["executable"] if isinstance(python, dict) else "?",
        boot_id=boot_id.strip() if isinstance(boot_id, str) else boot_id,
        cpus=int(cap.value("cpu_count") or 0),
        numa_nodes=parse_cpu_list(numa) if isinstance(numa, str) else numa,
        container=detect_container(cap),
        clock=float(cap.value("time") or 0.0),
        asked=cap.asked,
    )
