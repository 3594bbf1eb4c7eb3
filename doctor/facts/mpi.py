"""MPI on the node: which implementation ``mpirun`` is, its version, and mpi4py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.frameworks import Package, package

# Banners of ``mpirun --version``, most specific first: Intel MPI is Hydra-based like MPICH, so
# its banner must win over the generic "HYDRA build details" (as Horovod's detector does).
# The same banners read ``ompi_info``, ``mpichversion`` and the MPI_Get_library_version strings
# people paste (mpi4py's MPI.Get_library_version()); MVAPICH and Cray MPICH are MPICH-derived,
# so their own names must win over MPICH's.
_BANNERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "Intel MPI",
        re.compile(r"Intel\(R\) MPI Library[^\n]*?(?:Version\s+)?(\d+(?:\.\d+)*(?: Update \d+)?)"),
    ),
    ("MVAPICH", re.compile(r"MVAPICH2?[ \t]*(?:Version[ \t]*:?[ \t]*|[ \t])(\d[\w.]*)")),
    ("Cray MPICH", re.compile(r"CRAY MPICH version\s+(\d[\w.]*)", re.I)),
    ("Open MPI", re.compile(r"\((?:Open MPI|OpenRTE)\)\s+(\S+)")),
    ("IBM Spectrum MPI", re.compile(r"IBM Spectrum MPI\D*(\d[\w.]*)")),
    ("Open MPI", re.compile(r"^[ \t]*Open MPI:[ \t]*(\d[\w.]*)", re.M)),  # ompi_info
    ("Open MPI", re.compile(r"^ompi:version:full:(\d[\w.]*)", re.M)),  # ompi_info --parsable
    ("Open MPI", re.compile(r"Open MPI v(\d[\w.]*?)(?:,|\s|$)")),  # MPI_Get_library_version
    # "MPICH Version:\t4.0.2"; a copy that lost the tab reads "MPICH Version:3.4.3", and
    # Python's repr of the string (`>>> MPI.Get_library_version()`) spells the tab "\t".
    (
        "MPICH",
        re.compile(r"(?:HYDRA build details|MPICH).*?Version:(?:\s|\\t)*(\d[\w.]*)", re.S),
    ),
)


@dataclass(frozen=True)
class MpiFacts:
    implementation: str | Missing  # "Open MPI", "MPICH", "Intel MPI", "IBM Spectrum MPI"
    version: str | Missing
    mpirun: str | Missing  # the launcher's real path
    mpi4py: Package | None
    mpi4py_built_for: (
        str | None
    )  # "mpicc /usr/bin/mpicc" (mpi.cfg), or a wheel's "mpich, openmpi ABI"


def parse_mpirun_version(text: str) -> tuple[str, str] | None:
    for name, pattern in _BANNERS:
        m = pattern.search(text)
        if m:
            return name, m.group(1)
    return None


def parse_mpi(cap: Capture) -> MpiFacts | Missing:
    result = cap.command("mpi:mpirun")
    mpiexec = cap.command("mpi:mpiexec")  # run only where there is no mpirun
    if isinstance(result, Missing) and not isinstance(mpiexec, Missing):
        result = mpiexec
    mpi4py = package(cap, "mpi4py", "__init__.py")
    if isinstance(result, Missing) and mpi4py is None:
        return Missing(f"no MPI: {result.reason}", result.kind)
    if isinstance(result, Missing):
        impl: str | Missing = result
        version: str | Missing = result
        launcher: str | Missing = result
    else:
        parsed = parse_mpirun_version(result.stdout + result.stderr)
        first = (result.stdout + result.stderr).strip().splitlines()[:1]
        unknown = Missing(f"unrecognised {result.argv[0]} --version: {first}", "failed")
        impl, version = parsed if parsed else (unknown, unknown)
        real = cap.value(f"realpath:{result.argv[0]}")
        launcher = real if isinstance(real, str) else result.argv[0]
    return MpiFacts(impl, version, launcher, mpi4py, _mpi4py_built_for(cap, mpi4py))


def _mpi4py_built_for(cap: Capture, mpi4py: Package | None) -> str | None:
    if mpi4py is None:
        return None
    cfg = cap.file(f"{mpi4py.location}/mpi.cfg")
    if isinstance(cfg, str):
        for line in cfg.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "mpicc":
                return f"mpicc {value.strip()}"
    entries = cap.dir(mpi4py.location)
    if isinstance(entries, Missing):
        return None
    # A binary wheel ships one extension per MPI ABI: MPI.mpich.cpython-311-….so, MPI.openmpi….
    abis = sorted(e.split(".")[1] for e in entries if e.startswith("MPI.") and e.count(".") > 2)
    return f"{', '.join(abis)} ABI" if abis else None
