"""HostFacts: the node as an operating system sees it, beside its GPUs and network.

Disk space and mount answers (disk.py), the mount table (mounts.py), memory and swap
(memory.py), temperatures (sensors.py), the SLURM node state (slurm.py), and here the CPUs,
load, frequency governor, processes stuck in D state, and the daemons a GPU node runs. Each is
a value or a Missing; a pasted output fills the part it shows (doctor/paste/host.py puts it in
the slots named here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.host.disk import Space, from_probe, parse_df
from doctor.facts.host.memory import Memory, SwapArea, parse_free, parse_meminfo, parse_swaps
from doctor.facts.host.mounts import Mount, parse_mount_listing, parse_mountinfo
from doctor.facts.host.sensors import Temperature, from_hwmon, parse_sensors
from doctor.facts.host.slurm import SlurmNode, parse_scontrol_node

# Slots a pasted output fills (each SLOT + ":<crc>", one per pasted segment).
DF, FREE, SWAPS, SENSORS, MOUNTS = (
    "host:df",
    "host:free",
    "host:swaps",
    "host:sensors",
    "host:mounts",
)
T = TypeVar("T")
TOOLKIT = ("nvidia-container-cli", "nvidia-ctk", "nvidia-container-runtime")


@dataclass(frozen=True)
class Cpus:
    count: int  # logical CPUs online
    models: tuple[tuple[str, int], ...]  # (model name, logical CPUs), most first
    sockets: int | None

    @property
    def model(self) -> str:
        return " + ".join(m for m, _ in self.models) or "?"


@dataclass(frozen=True)
class CpuFreq:
    driver: str | None  # scaling_driver: intel_pstate, amd-pstate-epp, acpi-cpufreq, ...
    governors: dict[str, int]  # governor -> CPUs using it


@dataclass(frozen=True)
class Stuck:
    pid: int
    comm: str
    wchan: str  # the kernel function it waits in


@dataclass(frozen=True)
class HostFacts:
    spaces: tuple[Space, ...] | Missing
    mounts: tuple[Mount, ...] | Missing
    memory: Memory | Missing
    swaps: tuple[SwapArea, ...] | Missing
    cpus: Cpus | Missing
    load: tuple[float, float, float] | Missing
    cpufreq: CpuFreq | Missing
    stuck: tuple[Stuck, ...] | Missing
    daemons: dict[str, tuple[int, ...]] | Missing
    toolkit: tuple[str, ...] | Missing  # the NVIDIA container toolkit's programs found
    temperatures: tuple[Temperature, ...] | Missing
    slurm: SlurmNode | Missing
    path_timeout: float | None  # the deadline paths were asked within (a probed node)

    @property
    def nfs_mounts(self) -> tuple[Mount, ...]:
        return tuple(m for m in self.mounts if m.network) if isinstance(self.mounts, tuple) else ()


def _pasted(cap: Capture, slot: str) -> list[str]:
    names = sorted(n for n in cap.raw.get("commands", {}) if n.startswith(slot + ":"))
    out = []
    for name in names:
        result = cap.command(name)
        if not isinstance(result, Missing):
            out.append(result.stdout)
    return out


def _missing(what: str) -> Missing:
    return Missing(f"{what} was not captured", "unsupported")


def _mounts(cap: Capture) -> tuple[Mount, ...] | Missing:
    pasted = _pasted(cap, MOUNTS)
    if pasted:
        return tuple(m for text in pasted for m in parse_mount_listing(text))
    text = cap.file("/proc/self/mountinfo")
    return parse_mountinfo(text) if isinstance(text, str) else text


def _spaces(cap: Capture, mounts: tuple[Mount, ...] | Missing) -> tuple[Space, ...] | Missing:
    pasted = _pasted(cap, DF)
    if pasted:
        return tuple(s for text in pasted for s in parse_df(text))
    value = cap.value("host:paths")
    if isinstance(value, Missing):
        return value
    spec = cap.raw["probe"].get("spec")
    table = mounts if isinstance(mounts, tuple) else ()
    return tuple(from_probe(value, spec if isinstance(spec, dict) else {}, table))


def _memory(cap: Capture) -> Memory | Missing:
    for text in _pasted(cap, FREE):
        found = parse_free(text)
        if found is not None:
            return found
    meminfo = cap.file("/proc/meminfo")
    if isinstance(meminfo, Missing):
        return meminfo
    return parse_meminfo(meminfo) or Missing("/proc/meminfo has no MemTotal", "failed")


def _swaps(cap: Capture) -> tuple[SwapArea, ...] | Missing:
    pasted = _pasted(cap, SWAPS)
    if pasted:
        return tuple(s for text in pasted for s in parse_swaps(text))
    text = cap.file("/proc/swaps")
    return parse_swaps(text) if isinstance(text, str) else text


def _cpus(cap: Capture) -> Cpus | Missing:
    value = cap.value("host:cpus")
    if isinstance(value, Missing):
        return value
    models = sorted(((str(k), int(v)) for k, v in value["models"].items()), key=lambda m: -m[1])
    count = cap.value("cpu_count")
    total = int(count) if isinstance(count, int) else sum(n for _, n in models)
    sockets = value.get("sockets")
    return Cpus(total, tuple(models), int(sockets) if isinstance(sockets, int) else None)


def _load(cap: Capture) -> tuple[float, float, float] | Missing:
    text = cap.file("/proc/loadavg")
    if isinstance(text, Missing):
        return text
    one, five, fifteen = (float(w) for w in text.split()[:3])
    return one, five, fifteen


def _cpufreq(cap: Capture) -> CpuFreq | Missing:
    value = cap.value("host:cpufreq")
    if isinstance(value, Missing):
        return Missing(value.reason.split("LookupError: ", 1)[-1], value.kind)
    governors = {str(k): int(v) for k, v in value["governors"].items()}
    return CpuFreq(value.get("driver"), governors)


def _stuck(cap: Capture) -> tuple[Stuck, ...] | Missing:
    value = cap.value("host:dstate")
    if isinstance(value, Missing):
        return value
    return tuple(Stuck(int(p["pid"]), str(p["comm"]), str(p.get("wchan", ""))) for p in value)


def _daemons(cap: Capture) -> dict[str, tuple[int, ...]] | Missing:
    value = cap.value("host:daemons")
    if isinstance(value, Missing):
        return value
    return {str(k): tuple(int(p) for p in v) for k, v in value.items()}


def _toolkit(cap: Capture) -> tuple[str, ...] | Missing:
    found = [cap.value("which:" + tool) for tool in TOOLKIT]
    if all(isinstance(f, Missing) for f in found):
        return _missing("the container toolkit's programs")
    return tuple(tool for tool, f in zip(TOOLKIT, found, strict=False) if isinstance(f, str) and f)


def _temperatures(cap: Capture) -> tuple[Temperature, ...] | Missing:
    pasted = _pasted(cap, SENSORS)
    if pasted:
        return tuple(t for text in pasted for t in parse_sensors(text))
    found = from_hwmon(cap)
    if found:
        return found
    listed = cap.dir("/sys/class/hwmon")
    if isinstance(listed, Missing):
        return listed
    return Missing("no hwmon temperature sensor in /sys/class/hwmon", "absent")


def _slurm(cap: Capture) -> SlurmNode | Missing:
    result = cap.command("slurm:node")
    if isinstance(result, Missing):
        return (
            Missing("not under SLURM (no job, no slurmd here)", "absent")
            if ("was not run" in result.reason)
            else result
        )
    node = parse_scontrol_node(result.stdout)
    if result.rc != 0 or node is None:
        why = (result.stderr or result.stdout).strip().splitlines()
        return Missing(f"scontrol show node: {why[-1] if why else f'exit {result.rc}'}", "failed")
    return node


def _safe(parse: Callable[[], T], what: str) -> T | Missing:
    """One part's parser; odd input makes that part Missing, not the whole host."""
    try:
        return parse()
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        return Missing(f"could not parse {what}: {type(exc).__name__}: {exc}", "failed")


def parse_host(cap: Capture) -> HostFacts:
    mounts = _safe(lambda: _mounts(cap), "the mount table")
    spec = cap.raw["probe"].get("spec")
    timeout = spec.get("path_timeout") if isinstance(spec, dict) else None
    return HostFacts(
        spaces=_safe(lambda: _spaces(cap, mounts), "disk space"),
        mounts=mounts,
        memory=_safe(lambda: _memory(cap), "memory"),
        swaps=_safe(lambda: _swaps(cap), "swap"),
        cpus=_safe(lambda: _cpus(cap), "CPUs"),
        load=_safe(lambda: _load(cap), "/proc/loadavg"),
        cpufreq=_safe(lambda: _cpufreq(cap), "cpufreq"),
        stuck=_safe(lambda: _stuck(cap), "D-state processes"),
        daemons=_safe(lambda: _daemons(cap), "daemons"),
        toolkit=_safe(lambda: _toolkit(cap), "the container toolkit"),
        temperatures=_safe(lambda: _temperatures(cap), "temperatures"),
        slurm=_safe(lambda: _slurm(cap), "the SLURM node state"),
        path_timeout=float(timeout) if isinstance(timeout, (int, float)) else None,
    )
