"""What runs the node besides the job: the daemons a GPU node needs, the SLURM node state, the CPU
frequency governor, and the temperatures its sensors report.

The fabric manager of an NVSwitch system is judged by gpu.fabric (checks/gpu_health.py), the
persistence mode by gpu.modes; here, what those do not see.
"""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.host.host import HostFacts
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

NVIDIA = 0x10DE
RUNTIMES = ("dockerd", "containerd", "crio", "podman")
# Drivers whose "powersave" governor still scales up under load (intel_pstate and amd-pstate in
# active mode pick the frequency themselves: the governor only sets a preference).
SELF_SCALING = ("intel_pstate", "amd-pstate-epp", "amd-pstate")


def _host(facts: NodeFacts) -> HostFacts:
    return need(facts.host, "host")


def _nvidia_gpus(facts: NodeFacts) -> int:
    gpus = facts.gpus
    if not isinstance(gpus, Missing):
        count = sum(1 for g in gpus.gpus if g.vendor == "nvidia")
        if count:
            return count
    pci = facts.pci if isinstance(facts.pci, list) else []
    return sum(1 for d in pci if d.vendor == NVIDIA and d.pci_class >> 16 in (0x03, 0x12))


@node_check(
    "host.services",
    "A GPU node runs the daemons its GPUs need: nvidia-persistenced, the container toolkit",
    needs=("host",),
    codes={
        "host.services.persistenced": "persistence mode is on but nvidia-persistenced does not "
        "run: `nvidia-smi -pm 1` set it, and a reboot or driver reload undoes it",
        "host.services.container_toolkit": "a container runtime runs but the NVIDIA container "
        "toolkit is not installed: containers get no GPUs",
    },
)
def services(facts: NodeFacts) -> Iterator[Finding]:
    if not _nvidia_gpus(facts):
        raise Skip("no NVIDIA GPU: the GPU daemons are not needed here")
    host = _host(facts)
    daemons = need(host.daemons, "daemons")
    gpus = facts.gpus
    modes = [g.persistence_mode for g in gpus.gpus] if not isinstance(gpus, Missing) else []
    if not daemons.get("nvidia-persistenced") and modes and all(modes):
        yield Finding(
            "host.services.persistenced",
            Severity.INFO,
            "persistence mode is on without nvidia-persistenced: it lasts only until the driver "
            "reloads",
            evidence=("no nvidia-persistenced process",),
            fix=Fix(
                "Run the daemon instead.",
                commands("sudo systemctl enable --now nvidia-persistenced"),
            ),
        )
    running = [r for r in RUNTIMES if daemons.get(r)]
    inside = facts.system.container if not isinstance(facts.system, Missing) else None
    toolkit = host.toolkit
    if running and not inside and isinstance(toolkit, tuple) and not toolkit:
        yield Finding(
            "host.services.container_toolkit",
            Severity.WARN,
            f"{', '.join(running)} runs but the NVIDIA container toolkit is not installed: "
            "containers started here see no GPU",
            evidence=(
                "none of nvidia-container-cli, nvidia-ctk, nvidia-container-runtime on PATH",
            ),
            fix=Fix(
                "Install the NVIDIA container toolkit and configure the runtime.",
                (
                    command("sudo apt-get install -y nvidia-container-toolkit"),
                    command(
                        "sudo nvidia-ctk runtime configure --runtime={}", running[0].rstrip("d")
                    ),
                ),
            ),
        )


@node_check(
    "slurm.node",
    "Under SLURM, the node is not down or drained",
    needs=("host",),
    codes={
        "slurm.node.down": "SLURM has the node down, failed or not responding: no job runs there",
        "slurm.node.drain": "SLURM is draining the node: it takes no new job",
    },
)
def slurm_node(facts: NodeFacts) -> Iterator[Finding]:
    node = need(_host(facts).slurm, "SLURM")
    words = node.words
    reason = f" (reason: {node.reason})" if node.reason else ""
    name = node.name
    if words & {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "ERROR", "INVALID_REG", "NO_RESPOND"}:
        yield Finding(
            "slurm.node.down",
            Severity.FAIL,
            f"SLURM has {node.name} {node.state}{reason}",
            evidence=(f"scontrol show node {node.name}: State={node.state}",),
            fix=Fix(
                "Fix what the reason says, then return the node to service.",
                (
                    command("scontrol show node {}", name),
                    command("sudo scontrol update nodename={} state=resume", name),
                ),
            ),
        )
    elif words & {"DRAIN", "DRAINED", "DRAINING"}:
        yield Finding(
            "slurm.node.drain",
            Severity.WARN,
            f"SLURM is draining {node.name} ({node.state}){reason}",
            evidence=(f"scontrol show node {node.name}: State={node.state}",),
            fix=Fix(
                "Someone (or a health check) took it out of service; resume it once it is fixed.",
                (command("sudo scontrol update nodename={} state=resume", name),),
            ),
        )


@node_check(
    "host.governor",
    "The CPU frequency governor does not hold the CPUs back",
    needs=("host",),
    codes={
        "host.governor": "CPUs run a governor that keeps them slow (powersave, conservative, "
        "ondemand, userspace)",
        "host.governor.dynamic": "the governor scales the CPUs with load (schedutil, or "
        "powersave under intel_pstate/amd-pstate): fine for most jobs",
    },
)
def governor(facts: NodeFacts) -> Iterator[Finding]:
    freq = need(_host(facts).cpufreq, "cpufreq")
    others = {g: n for g, n in freq.governors.items() if g != "performance"}
    if not others:
        return
    shown = ", ".join(f"{g} on {n} CPU(s)" for g, n in sorted(others.items()))
    slow = {
        g
        for g in others
        if g != "schedutil" and not (g == "powersave" and (freq.driver or "") in SELF_SCALING)
    }
    fix = Fix(
        "Set the performance governor on training nodes (GCM and AMD Primus check for it).",
        commands("sudo cpupower frequency-set -g performance"),
    )
    yield Finding(
        "host.governor" if slow else "host.governor.dynamic",
        Severity.WARN if slow else Severity.INFO,
        f"CPU governor {shown} (driver {freq.driver or '?'})",
        evidence=(f"/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor: {shown}",),
        fix=fix,
    )


@node_check(
    "host.temperature",
    "No host sensor is at its high or critical temperature",
    needs=("host",),
    codes={
        "host.temperature.critical": "a sensor is at or above its critical limit: the hardware "
        "is about to throttle hard or shut down",
        "host.temperature.high": "a sensor is at or above its high limit",
    },
)
def temperature(facts: NodeFacts) -> Iterator[Finding]:
    temps = need(_host(facts).temperatures, "temperatures")
    if not temps:
        raise Skip("no temperature sensor reported")
    critical = [t for t in temps if t.crit is not None and t.celsius >= t.crit]
    high = [t for t in temps if t not in critical and t.high is not None and t.celsius >= t.high]
    fix = Fix(
        "Check the node's cooling: fans, airflow, blanking panels, the room.", commands("sensors")
    )
    for found, code, severity, limit in (
        (critical, "host.temperature.critical", Severity.FAIL, "crit"),
        (high, "host.temperature.high", Severity.WARN, "high"),
    ):
        if found:
            yield Finding(
                code,
                severity,
                f"{len(found)} sensor(s) at or above their {limit} limit: "
                + ", ".join(f"{t.chip} {t.label} {t.celsius:.0f}°C" for t in found[:4]),
                evidence=(
                    *tuple(
                        f"{t.chip} {t.label}: {t.celsius:.1f}°C (high {t.high}, crit {t.crit})"
                        for t in found[:8]
                    ),
                    "limit: the sensor's own (absolute)",
                ),
                fix=fix,
                data={"threshold": "absolute"},
            )


CHECKS = [services, slurm_node, governor, temperature]
