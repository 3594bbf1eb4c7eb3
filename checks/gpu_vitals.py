"""GPU vitals against thresholds: the margin to thermal slowdown, correctable ECC by kind, InfoROM,
PCIe replays, a lowered power cap or applications clock, mixed VBIOS, and the CUDA debug and
injection variables that slow or change every kernel.

Thresholds come from the shipped table (doctor/judge/thresholds.py, docs/checks.md lists the
sources) unless the run sets its own; a finding quotes the one it used. A power cap or a clock is
judged against the GPU's own default (absolute, no table needed).
"""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import Command, command, commands
from doctor.facts.gpu import Gpu
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import need_limit
from doctor.plugin import Skip, need, node_check

# DCGM's software test warns on each of these in the environment (nvvs/src/Software.cpp
# checkForBadEnvVaribles): a debugger, an injected profiler, forced boost or core dumps.
DEBUG_ENV = (
    "NSIGHT_CUDA_DEBUGGER",
    "CUDA_INJECTION32_PATH",
    "CUDA_INJECTION64_PATH",
    "CUDA_AUTO_BOOST",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "CUDA_PROFILE",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
)
# Serialises every kernel launch with the host: a debugging switch that costs training its
# overlap of compute and communication; "0" is the default.
LAUNCH_BLOCKING = "CUDA_LAUNCH_BLOCKING"


def _name(gpu: Gpu) -> str:
    return f"GPU{gpu.index} ({gpu.bus_id})"


def _gpus(facts: NodeFacts, what: str, field: str) -> list[Gpu]:
    gpus = need(facts.gpus, "GPUs").gpus
    if not gpus:
        raise Skip("no GPU listed")
    known = [g for g in gpus if getattr(g.health, field) is not None]
    if not known:
        raise Skip(f"no GPU reports {what}")
    return known


def _degrees(value: int | None) -> str:
    return "? °C" if value is None else f"{value} °C"


def _query(gpus: list[Gpu], what: str) -> Command:
    return command("nvidia-smi -q -i {} -d {}", gpus[0].bus_id, what)


@node_check(
    "gpu.thermal",
    "Every GPU has room before its thermal slowdown",
    needs=("gpus",),
    codes={
        "gpu.thermal.slowdown": "a GPU is at or past its slowdown temperature: it slows now",
        "gpu.thermal.margin": "a GPU is within a few degrees of its slowdown temperature",
        "gpu.thermal.memory": "a GPU's memory is within a few degrees of its limit",
    },
)
def thermal(facts: NodeFacts) -> Iterator[Finding]:
    gpus = _gpus(facts, "its margin to thermal slowdown", "slowdown_margin")
    threshold = need_limit(facts, "gpu.thermal_margin_c")
    hot = [g for g in gpus if (g.health.slowdown_margin or 0) <= 0]
    warm = [g for g in gpus if 0 < (g.health.slowdown_margin or 0) < threshold.value]
    fix = Fix(
        "Check the node's cooling (fans, airflow, inlet temperature, a blocked or failed fan, "
        "thermal paste on a reseated GPU); the GPU slows itself down at its limit and the whole "
        "job waits for it.",
        (_query(hot or warm or gpus, "TEMPERATURE,PERFORMANCE"),),
    )
    for code, severity, group, said in (
        ("gpu.thermal.slowdown", Severity.FAIL, hot, "at or past its slowdown temperature"),
        ("gpu.thermal.margin", Severity.WARN, warm, f"within {threshold.shown} °C of slowdown"),
    ):
        if group:
            yield Finding(
                code,
                severity,
                f"{len(group)} GPU(s) {said}: under load they throttle, and the job with them",
                evidence=(
                    *(
                        f"{_name(g)}: {_degrees(g.health.temperature)}, "
                        f"{g.health.slowdown_margin} °C before slowdown"
                        for g in group
                    ),
                    str(threshold),
                ),
                fix=fix,
                data={"threshold": "absolute", "limit": threshold.value},
            )
    memory = [
        g
        for g in gpus
        if g.health.memory_margin is not None and g.health.memory_margin < threshold.value
    ]
    if memory:
        yield Finding(
            "gpu.thermal.memory",
            Severity.WARN,
            f"{len(memory)} GPU(s)' memory within {threshold.shown} °C of its limit",
            evidence=(
                *(f"{_name(g)}: {g.health.memory_margin} °C left" for g in memory),
                str(threshold),
            ),
            fix=fix,
            data={"threshold": "absolute", "limit": threshold.value},
        )


@node_check(
    "gpu.ecc_correctable",
    "No GPU has more correctable ECC errors than the thresholds allow",
    needs=("gpus",),
    codes={
        "gpu.ecc.sram_threshold": "the driver says a GPU's SRAM error count passed its threshold",
        "gpu.ecc.sram_correctable": "a GPU's corrected SRAM errors are past the threshold",
        "gpu.ecc.dram_correctable": "a GPU's corrected DRAM errors are past the threshold",
    },
)
def ecc_correctable(facts: NodeFacts) -> Iterator[Finding]:
    gpus = need(facts.gpus, "GPUs").gpus
    fields = ("ecc_sram_corrected", "ecc_dram_corrected", "sram_threshold_exceeded")
    known = [g for g in gpus if any(getattr(g.health, f) is not None for f in fields)]
    if not known:
        raise Skip("no GPU reports its correctable ECC errors by kind (SRAM, DRAM)")
    flagged = [g for g in known if g.health.sram_threshold_exceeded]
    if flagged:
        yield Finding(
            "gpu.ecc.sram_threshold",
            Severity.WARN,
            f"{len(flagged)} GPU(s) passed NVIDIA's SRAM error threshold: the GPU needs service",
            evidence=tuple(f"{_name(g)}: SRAM Threshold Exceeded: Yes" for g in flagged),
            fix=Fix(
                "Drain the node and have the GPU checked (field diagnostics, RMA).",
                (_query(flagged, "ECC"),),
            ),
            data={"threshold": "absolute", "source": "the driver's own SRAM threshold"},
        )
    for code, field, name, kind in (
        ("gpu.ecc.sram_correctable", "ecc_sram_corrected", "gpu.sram_correctable", "SRAM"),
        ("gpu.ecc.dram_correctable", "ecc_dram_corrected", "gpu.dram_correctable", "DRAM"),
    ):
        threshold = need_limit(facts, name)
        over = [g for g in known if (getattr(g.health, field) or 0) > threshold.value]
        if over:
            yield Finding(
                code,
                Severity.WARN,
                f"{len(over)} GPU(s) corrected more {kind} ECC errors in their life than "
                f"{threshold.shown}: memory that keeps correcting tends to fail uncorrectably",
                evidence=(
                    *(f"{_name(g)}: {getattr(g.health, field)}" for g in over),
                    str(threshold),
                ),
                fix=Fix(
                    "Watch the count; drain the node and run the vendor's diagnostics if it grows.",
                    (_query(over, "ECC"), command("dcgmi diag -r 3")),
                ),
                data={"threshold": "absolute", "limit": threshold.value},
            )


@node_check(
    "gpu.board",
    "Every GPU's InfoROM is valid, its PCIe link replays little, its power cap and "
    "applications clocks are its defaults, and its VBIOS matches its siblings'",
    codes={
        "gpu.inforom.corrupt": "a GPU's InfoROM is corrupted",
        "gpu.pcie.replays": "a GPU's PCIe link replayed more packets than the threshold",
        "gpu.power.capped": "a GPU's power cap is below its default",
        "gpu.clocks.lowered": "a GPU's applications clocks are below their defaults",
        "gpu.vbios.mixed": "GPUs of one model run different VBIOS versions on one node",
        "gpu.xgmi.errors": "an AMD GPU's XGMI links counted uncorrectable errors",
    },
)
def board(facts: NodeFacts) -> Iterator[Finding]:
    host = facts.gpu_host
    # nvidia-smi's warning names a GPU with a corrupted InfoROM even where no GPU list was read.
    warned = set() if isinstance(host, Missing) else set(host.inforom_corrupt)
    gpus = () if warned and isinstance(facts.gpus, Missing) else need(facts.gpus, "GPUs").gpus
    if not gpus and not warned:
        raise Skip("no GPU listed")
    fields = ("inforom_valid", "pcie_replays", "power_limit", "app_clock", "vbios", "link_errors")
    if not warned and not any(getattr(g.health, f) is not None for g in gpus for f in fields):
        raise Skip("no GPU reports its InfoROM, PCIe replays, power cap, clocks or VBIOS")
    corrupt = [_name(g) for g in gpus if g.health.inforom_valid is False or g.bus_id in warned]
    corrupt += sorted(warned - {g.bus_id for g in gpus})
    if corrupt:
        yield Finding(
            "gpu.inforom.corrupt",
            Severity.WARN,
            f"{len(corrupt)} GPU(s) have a corrupted InfoROM: the GPU's ECC and retirement "
            "records cannot be kept, and NVML calls on it may fail",
            evidence=tuple(f"{c}: infoROM is corrupted" for c in corrupt),
            fix=Fix(
                "Have the GPU serviced (NVIDIA RMA); nvidia-smi exits 14 until then.",
                commands("nvidia-smi -q -d INFOROM"),
            ),
            data={"threshold": "absolute", "source": "NVML / nvidia-smi's own validation"},
        )
    replays = need_limit(facts, "gpu.pcie_replays")
    many = [g for g in gpus if (g.health.pcie_replays or 0) > replays.value]
    if many:
        yield Finding(
            "gpu.pcie.replays",
            Severity.WARN,
            f"{len(many)} GPU(s) replayed more than {replays.shown} PCIe packets since "
            "reset: a marginal link (riser, slot, retimer) that slows transfers or drops",
            evidence=(
                *(f"{_name(g)}: {g.health.pcie_replays}" for g in many),
                str(replays),
            ),
            fix=Fix("Reseat the GPU or its riser; check the slot.", (_query(many, "PCIE"),)),
            data={"threshold": "absolute", "limit": replays.value},
        )
    xgmi = [g for g in gpus if g.health.link_errors]
    if xgmi:
        yield Finding(
            "gpu.xgmi.errors",
            Severity.WARN,
            f"{len(xgmi)} GPU(s)' XGMI links counted uncorrectable errors since the driver "
            "loaded: RCCL's GPU-to-GPU traffic over them fails",
            evidence=tuple(
                f"{_name(g)}: xgmi_wafl uncorrectable {g.health.link_errors}" for g in xgmi
            ),
            fix=Fix(
                "Reset the GPUs of the hive (or reboot); if the count returns, service the node.",
                commands("amd-smi metric --ecc-blocks", "rocm-smi --showxgmierr"),
            ),
            data={"threshold": "absolute", "source": "AzHC check_gpu_xgmi fails on any count"},
        )
    yield from _defaults(gpus)
    yield from _vbios(gpus)


def _defaults(gpus: tuple[Gpu, ...]) -> Iterator[Finding]:
    capped = [
        g
        for g in gpus
        if g.health.power_limit
        and g.health.power_default
        and g.health.power_limit < g.health.power_default - 1
    ]
    if capped:
        yield Finding(
            "gpu.power.capped",
            Severity.WARN,
            f"{len(capped)} GPU(s) capped below their default power limit: they clock down "
            "under load, and the job runs at the slowest GPU's pace",
            evidence=tuple(
                f"{_name(g)}: {g.health.power_limit:g} W of {g.health.power_default:g} W"
                for g in capped
            ),
            fix=Fix(
                "Restore the default power limit (unless the data centre set it on purpose).",
                (
                    command(
                        "sudo nvidia-smi -i {} -pl {}",
                        capped[0].bus_id,
                        f"{capped[0].health.power_default:g}",
                    ),
                ),
            ),
            data={"threshold": "absolute", "source": "the GPU's own default power limit"},
        )
    lowered = [
        g
        for g in gpus
        if (
            g.health.app_clock
            and g.health.app_clock_default
            and g.health.app_clock < g.health.app_clock_default
        )
        or (
            g.health.app_mem_clock
            and g.health.app_mem_clock_default
            and g.health.app_mem_clock < g.health.app_mem_clock_default
        )
    ]
    if lowered:
        yield Finding(
            "gpu.clocks.lowered",
            Severity.WARN,
            f"{len(lowered)} GPU(s) have applications clocks set below their defaults",
            evidence=tuple(
                f"{_name(g)}: graphics {g.health.app_clock} of {g.health.app_clock_default} MHz,"
                f" memory {g.health.app_mem_clock} of {g.health.app_mem_clock_default} MHz"
                for g in lowered
            ),
            fix=Fix(
                "Reset the applications clocks to their defaults.",
                (command("sudo nvidia-smi -i {} -rac", lowered[0].bus_id),),
            ),
            data={"threshold": "absolute", "source": "the GPU's default applications clocks"},
        )


def _vbios(gpus: tuple[Gpu, ...]) -> Iterator[Finding]:
    by_model: dict[str, dict[str, list[Gpu]]] = {}
    for g in gpus:
        if g.health.vbios:
            by_model.setdefault(g.name, {}).setdefault(g.health.vbios, []).append(g)
    for model, versions in by_model.items():
        if len(versions) < 2:
            continue
        yield Finding(
            "gpu.vbios.mixed",
            Severity.WARN,
            f"{model}: {len(versions)} VBIOS versions on one node",
            evidence=tuple(
                f"VBIOS {v}: {', '.join(_name(g) for g in members)}"
                for v, members in versions.items()
            ),
            fix=Fix("Flash every GPU to the same VBIOS (the vendor's firmware bundle)."),
            data={"threshold": "relative", "versions": sorted(versions)},
        )


@node_check(
    "gpu.env",
    "No CUDA debugging, profiling or injection variable is set for the job",
    needs=("env",),
    codes={"gpu.env.debug": "a CUDA debugging, profiling or injection variable is set"},
)
def cuda_env(facts: NodeFacts) -> Iterator[Finding]:
    env = need(facts.env, "environment")
    if isinstance(facts.gpus, Missing) or not facts.gpus.gpus:
        raise Skip("no GPU listed: CUDA's variables change nothing here")
    found = [k for k in DEBUG_ENV if k in env]
    if env.get(LAUNCH_BLOCKING, "0").strip() not in ("", "0"):
        found.append(LAUNCH_BLOCKING)
    if not found:
        return
    yield Finding(
        "gpu.env.debug",
        Severity.WARN,
        f"{', '.join(found)} set: every CUDA kernel runs under a debugger, profiler, injected "
        "library or synchronous launch, slower or differently than in production",
        evidence=tuple(f"{k}={env[k]}" for k in found),
        fix=Fix(
            "Unset them for training (they belong to a debugging session).",
            tuple(command("unset {}", k) for k in found),
        ),
        data={"threshold": "absolute", "source": "DCGM nvvs/src/Software.cpp", "set": found},
    )


CHECKS = [thermal, ecc_correctable, board, cuda_env]
