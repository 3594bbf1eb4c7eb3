"""The shipped table of thresholds: every number a check judges against, with where it comes from.

A threshold is absolute (a limit a value is held to on its own: 5 % free disk) or relative (how
far a node may stray from the others: 5 % less memory than the median node). Each row says which,
its default, and the source of the default; docs/checks.md lists them all (generated from
``THRESHOLDS``). A row may carry per-profile values (a GPU SKU's floor, keyed by the profile's
name): ``threshold(name, profile)`` gives the profile's value where there is one, else the default.

Users override any of them in ``doctor.toml`` (or ``[tool.cluster-doctor]`` in pyproject.toml):

    [thresholds.host]
    disk_free_pct = 10         # every profile
    [thresholds."gpu.some_floor"]
    H100 = 400                 # one profile of a row that has profiles

doctor/cli/config.py reads the table once per command (``set_overrides``); a name that is no row
of the table is a usage error, so a typo never passes for a setting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from doctor.core.errors import UsageError

Kind = Literal["absolute", "relative"]
ALL_PROFILES = "*"  # the key of an override that applies whatever the profile


@dataclass(frozen=True)
class Threshold:
    name: str  # "host.disk_free_pct": the area, then the setting
    default: float
    unit: str  # "%", "GiB", "s", "count"
    kind: Kind
    meaning: str  # what crossing it means, one line
    source: str  # where the default comes from (a peer's file, a document, or our reason)
    profiles: Mapping[str, float] = field(default_factory=dict)


THRESHOLDS: tuple[Threshold, ...] = (
    Threshold(
        "host.disk_free_pct",
        5.0,
        "%",
        "absolute",
        "a filesystem the job writes to (/, /tmp, /dev/shm, $HOME, --path, --mount) has less "
        "free space than this: warn",
        "imbue-ai/cluster-health health_checks/health_checks.py DiskSpace (at least 5 % free)",
    ),
    Threshold(
        "host.disk_full_pct",
        1.0,
        "%",
        "absolute",
        "less free space than this: the filesystem is full, fail",
        "ours: at 1 % (df's 99 %) a checkpoint, a core dump or NCCL's /dev/shm segment no "
        "longer fits; the 5 % warning above leaves room to act first",
    ),
    Threshold(
        "host.inodes_free_pct",
        5.0,
        "%",
        "absolute",
        "a filesystem has fewer free inodes than this: warn (none left: fail)",
        "LBNL NHC scripts/lbnl_fs.nhc check_fs_inodes, with imbue's 5 % for space applied to "
        "inodes (NHC publishes no default)",
    ),
    Threshold(
        "host.path_timeout_s",
        3.0,
        "s",
        "absolute",
        "a path that has not answered statvfs/access in this many seconds hangs (a stuck NFS "
        "server): its child is abandoned and the path fails",
        "ours: NFS's own major timeout is 60 s (nfs(5) timeo=600), far beyond a preflight; a "
        "local or healthy network filesystem answers in milliseconds",
    ),
    Threshold(
        "host.swap_used_pct",
        5.0,
        "%",
        "absolute",
        "swap in use above this share of RAM: the node is paging, warn",
        "ours: AzHC, LBNL NHC and imbue want swap off altogether (check_hw_swap, Swap); swap "
        "that is on but unused only slows nothing, so only its use warns",
    ),
    Threshold(
        "host.mem_available_pct",
        10.0,
        "%",
        "absolute",
        "MemAvailable below this share of MemTotal before the job starts: warn",
        "ours: LBNL NHC check_hw_mem_free and AMD Primus's low-available-memory check take the "
        "limit as an argument; 10 % is what page cache and a leftover process leave on an "
        "otherwise idle node",
    ),
    Threshold(
        "host.load_ratio",
        3.0,
        "x",
        "relative",
        "a node's 5-minute load per CPU is this many times the median node's (and above 1 per "
        "CPU): it is busy with something else, warn",
        "ours: LBNL NHC check_ps_loadavg takes absolute limits per site; compared across nodes "
        "a cluster-wide load (a loaded test bed, a shared machine) blames no node",
    ),
    Threshold(
        "host.memory_drift_pct",
        5.0,
        "%",
        "relative",
        "a node's MemTotal is this much below the median node's: a DIMM is missing, warn",
        "ours: one DIMM of 16 is 6.25 % of RAM; firmware reservations differ by far less "
        "(AzHC/NHC check_hw_physmem take absolute bounds)",
    ),
    Threshold(
        "host.dstate_seconds",
        0.5,
        "s",
        "absolute",
        "a process in uninterruptible sleep (D) at two looks this far apart is stuck: warn",
        "ours: a disk read leaves D within milliseconds; GCM check-dstate samples the same "
        "state field of /proc/<pid>/stat",
    ),
    Threshold(
        "kernel.aer_corrected_max",
        480.0,
        "count",
        "absolute",
        "corrected PCIe (AER) errors in the kernel log's window above this: warn",
        "NVIDIA DCGM nvvs/plugin_src/pcie/Pcie.cpp aer_threshold 480 (32 a minute for 15 minutes)",
    ),
    Threshold(
        "kernel.memory_ce_max",
        100.0,
        "count",
        "absolute",
        "corrected memory errors (EDAC CE, corrected APEI/GHES records) in the window above "
        "this: warn",
        "ours: LBNL NHC check_hw_mcelog fails on any; a DIMM that corrects a few errors over "
        "its life is healthy, one that corrects hundreds is about to fail",
    ),
)
BY_NAME: dict[str, Threshold] = {t.name: t for t in THRESHOLDS}

# Overrides from the config file: threshold name -> profile (or ALL_PROFILES) -> value.
_overrides: dict[str, dict[str, float]] = {}


def threshold(name: str, profile: str | None = None) -> float:
    """The value in effect: the config's for this profile, the config's for every profile, the
    table's for this profile, the table's default."""
    row = BY_NAME[name]  # a KeyError here is a check naming a row that does not exist
    given = _overrides.get(name, {})
    if profile is not None and profile in given:
        return given[profile]
    if ALL_PROFILES in given:
        return given[ALL_PROFILES]
    if profile is not None and profile in row.profiles:
        return row.profiles[profile]
    return row.default


def overridden(name: str) -> bool:
    """Whether the config file sets this threshold (a finding says where its limit came from)."""
    return name in _overrides


def described(name: str, profile: str | None = None) -> str:
    """'host.disk_free_pct = 5 % (absolute)', for a finding's evidence."""
    row = BY_NAME[name]
    value = threshold(name, profile)
    where = ", doctor.toml" if overridden(name) else ""
    return f"{name} = {value:g} {row.unit} ({row.kind}{where})"


def set_overrides(table: Mapping[str, Any], source: str) -> None:
    """Take a config file's ``[thresholds]`` table (replacing any earlier one); UsageError naming
    the file and key for a name that is no threshold or a value that is no number."""
    parsed: dict[str, dict[str, float]] = {}
    _walk(table, "", parsed, source)
    _overrides.clear()
    _overrides.update(parsed)


def _walk(
    table: Mapping[str, Any], prefix: str, out: dict[str, dict[str, float]], src: str
) -> None:
    for key, value in table.items():
        name = f"{prefix}{key}"
        if name in BY_NAME:
            if isinstance(value, Mapping):
                out[name] = {str(p): _number(v, f"{name}.{p}", src) for p, v in value.items()}
            else:
                out[name] = {ALL_PROFILES: _number(value, name, src)}
        elif isinstance(value, Mapping) and any(t.startswith(name + ".") for t in BY_NAME):
            _walk(value, name + ".", out, src)
        else:
            raise UsageError(f"{src}: unknown threshold {name!r} (see docs/checks.md, Thresholds)")


def _number(value: Any, name: str, src: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{src}: threshold {name!r} must be a number, not {value!r}")
    return float(value)
