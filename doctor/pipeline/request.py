"""What one run of the pipeline is asked to do. Every command builds one Request.

The settings users give on the command line are declared here, each field with its flag
(doctor/core/flag.py), so a setting several commands share is declared once.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated

from doctor.core.capture import Capture
from doctor.core.errors import UsageError
from doctor.core.flag import flag
from doctor.facts.allreduce import Deadlines, default_sizes
from doctor.nodes.targets import Targets
from doctor.plugin import CheckSpec
from doctor.stages.pairs import Sampling

BACKENDS = ("auto", "gloo", "nccl")
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_size(text: str) -> int:
    """``64M`` / ``64MiB`` / ``1024`` → bytes."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"--sizes: {text!r} is not a size (examples: 1024, 1K, 64M)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> tuple[int, ...]:
    """``1K..64M`` (powers of two between) or ``4K,1M`` (exactly these)."""
    if ".." in text:
        low, _, high = text.partition("..")
        try:
            return default_sizes(parse_size(low), parse_size(high))
        except ValueError as exc:
            raise UsageError(f"--sizes: {exc}") from None
    sizes = tuple(parse_size(part) for part in text.split(",") if part.strip())
    if not sizes or min(sizes) < 4:
        raise UsageError("--sizes: give at least one size of 4 bytes or more")
    return sizes


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs (the recommendation to try) → a dict."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _NAME.match(name):
            raise UsageError(f"--recommend: {pair!r} is not NAME=VALUE")
        env[name] = value
    return env


SINCE_ENV = "CLUSTER_DOCTOR_SINCE"
_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float) -> float | None:
    """--since: "boot" (None: the whole log of this boot), "@EPOCH", an age ("2h", "30m", "1d")
    or a local date and time ("2026-11-29 06:30", "2026-11-29T06:30:00") → seconds since the
    epoch."""
    value = text.strip()
    if value.lower() in ("", "boot"):
        return None
    if value.startswith("@"):
        try:
            return float(value[1:])
        except ValueError:
            pass
    ago = _AGO.match(value.lower())
    if ago:
        return now - float(ago.group(1)) * _SECONDS[ago.group(2)]
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise UsageError(
            f"--since: {text!r} is not boot, @EPOCH, an age (30m, 2h, 1d) or a date and time"
        ) from None


@dataclass(frozen=True)
class ProbeSettings:
    torch: Annotated[
        bool,
        flag(
            "--torch/--no-torch", help="Import torch on each node for its NCCL and CUDA (seconds)."
        ),
    ] = False
    deadline: Annotated[
        float, flag("--deadline", min=1.0, help="Seconds the probe may take on a node.")
    ] = 20.0
    since: Annotated[
        str,
        flag(
            "--since",
            help="The kernel log's window: boot (all of this boot), an age (30m, 2h, 1d), "
            "@EPOCH or a date and time; lines before it are not judged.",
            envvar=SINCE_ENV,
        ),
    ] = "boot"
    paths: Annotated[
        list[str] | None,
        flag(
            "--path",
            help="A folder jobs write to (checkpoints, a dataset cache): its space and inodes "
            "are judged and it must answer and be writable (repeatable).",
        ),
    ] = None
    mounts: Annotated[
        list[str] | None,
        flag(
            "--mount",
            help="A mount point every node must have, answering and writable (repeatable).",
        ),
    ] = None

    def __post_init__(self) -> None:
        parse_since(self.since, 0.0)  # a bad value is a usage error before any node is probed
        for path in [*(self.paths or []), *(self.mounts or [])]:
            if not path.startswith("/"):
                raise UsageError(f"--path/--mount: {path!r} is not an absolute path")

    gpu_tests: Annotated[
        bool,
        flag(
            "--gpu-tests/--no-gpu-tests",
            help="Run short GPU tests on each node (about a minute, bounded): the node's own "
            "allreduce over NVLink at 256 MB-4 GB, a GEMM, memory, host and P2P bandwidth.",
        ),
    ] = False


@dataclass(frozen=True)
class StageSettings:
    """The cross-node stages: preflight's defaults; other commands run with NO_STAGES."""

    mesh: Annotated[
        Sampling,
        flag(
            "--mesh",
            help="SSH from node to node: auto (every pair up to 16 nodes, a sample beyond), "
            "full, sampled or off.",
        ),
    ] = Sampling.auto
    no_mesh: Annotated[bool, flag("--no-mesh", help="The same as --mesh off.")] = False
    reach: Annotated[
        Sampling,
        flag(
            "--reach",
            help="TCP between nodes on each candidate interface: auto (every pair up to 32 "
            "nodes, a sample beyond), full, sampled or off.",
        ),
    ] = Sampling.auto
    no_reach: Annotated[bool, flag("--no-reach", help="The same as --reach off.")] = False
    seed: Annotated[
        int | None,
        flag("--seed", help="Seed of the sampled pairs (default: new each run, in the report)."),
    ] = None
    master: Annotated[
        str | None,
        flag("--master-addr", help="Rendezvous name every node must resolve (default: node 1)."),
    ] = None
    allreduce: Annotated[
        bool, flag("--allreduce/--no-allreduce", help="End with a real allreduce.")
    ] = True

    @property
    def mesh_mode(self) -> Sampling:
        return Sampling.off if self.no_mesh else self.mesh

    @property
    def reach_mode(self) -> Sampling:
        return Sampling.off if self.no_reach else self.reach


NO_STAGES = StageSettings(mesh=Sampling.off, reach=Sampling.off, allreduce=False)


@dataclass(frozen=True)
class AllreduceSettings:
    backend: Annotated[
        str, flag("--backend", help="auto (NCCL where every node has a GPU), gloo or nccl.")
    ] = "auto"
    port: Annotated[int, flag("--port", help="Rendezvous port on the first node.")] = 29500
    ranks: Annotated[
        int | None,
        flag(
            "--ranks",
            min=1,
            help="Without hosts: Gloo ranks on this machine (allreduce: 2, preflight: 1).",
        ),
    ] = None
    sizes: Annotated[
        str,
        flag(
            "--sizes",
            help="Sweep sizes: auto (doubling until the bandwidth plateaus, about 3 s), "
            "LOW..HIGH (powers of two) or a,b,c.",
        ),
    ] = "auto"
    recommend: Annotated[
        list[str] | None,
        flag("--recommend", help="NAME=VALUE to try as recommended (repeatable)."),
    ] = None
    iface: Annotated[
        str | None, flag("--iface", help="Interface whose address hosts the rendezvous.")
    ] = None
    launch_timeout: Annotated[
        float,
        flag(
            "--launch-timeout",
            min=1.0,
            help="Seconds every rank may take to start and import torch (raise it where torch "
            "loads from a slow shared filesystem); what it is raised by, the process group's "
            "set-up gets too.",
        ),
    ] = Deadlines.launch
    search: Annotated[
        bool,
        flag(
            "--search/--no-search",
            help="When the allreduce across every node fails, hangs or runs slow, find the "
            "nodes responsible by group testing (rounds of smaller allreduces).",
        ),
    ] = True
    deadlines: Deadlines = field(default_factory=Deadlines)

    def __post_init__(self) -> None:
        # Every value is checked here, so a bad one is a usage error before any node is probed.
        if self.backend not in BACKENDS:
            raise UsageError(f"--backend: expected one of {', '.join(BACKENDS)}")
        if not 1 <= self.port <= 65535:
            raise UsageError(f"--port: {self.port} is not a TCP port")
        self.size_list()
        self.recommendation()

    def size_list(self) -> tuple[int, ...] | None:
        """The sizes to sweep; None: sized by time."""
        return None if self.sizes.strip().lower() == "auto" else parse_sizes(self.sizes)

    def recommendation(self) -> dict[str, str] | None:
        """What to try as recommended, when given (None: the NIC recommendation)."""
        return parse_env(self.recommend) if self.recommend else None


@dataclass(frozen=True)
class CheckSettings:
    include: Annotated[
        list[str] | None, flag("--select", help="Run only checks with this id or prefix.")
    ] = None
    exclude: Annotated[
        list[str] | None, flag("--exclude", help="Skip checks with this id or prefix.")
    ] = None
    baseline: Annotated[
        Path | None,
        flag(
            "--baseline", help="Judge drift against this known-good node ('doctor baseline save')."
        ),
    ] = None


class Profile(str, enum.Enum):
    """How much of the preflight `doctor run` spends before the job."""

    quick = "quick"
    full = "full"


@dataclass(frozen=True)
class RunSettings:
    profile: Annotated[
        Profile,
        flag(
            "--profile",
            help="full: the whole preflight; quick: no size sweep, and no SSH mesh for "
            "launchers that do not use SSH between nodes.",
        ),
    ] = Profile.full
    force: Annotated[
        bool, flag("--force", help="Launch even when the gate finds what it cannot fix.")
    ] = False
    logs: Annotated[
        Path | None,
        flag("--logs", help="Folder for each node's whole output (default: a new temp folder)."),
    ] = None
    grace: Annotated[
        float,
        flag("--grace", min=0.0, help="Seconds the other nodes get after one node's job fails."),
    ] = 10.0
    time_limit: Annotated[
        float | None,
        flag("--time-limit", min=1.0, help="Seconds the job may run; then every node is ended."),
    ] = None
    spares: Annotated[
        int,
        flag(
            "--spares",
            min=0,
            help="Leave out up to K nodes whose failing findings name only them, and launch on "
            "the rest (node list, counts and rendezvous computed for them); more: no launch.",
        ),
    ] = 0


@dataclass(frozen=True)
class Request:
    """One run: which nodes (or which saved captures), what to probe, which stages run, which
    checks judge. Every command is one of these with some stages switched off."""

    command: str
    targets: Targets = field(default_factory=Targets)
    # Judge these captures (saved or pasted) instead of probing nodes: no transport, no stages.
    captures: Mapping[str, Capture] | None = None
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    stages: StageSettings = NO_STAGES
    allreduce: AllreduceSettings | None = None  # None: no allreduce
    # The checks to run; their probe needs are captured even when they do not run (judge off).
    checks: tuple[CheckSpec, ...] = ()
    judge: bool = True
    baseline: Path | None = None
    nics_section: bool = False  # the report shows the per-node NIC plans
