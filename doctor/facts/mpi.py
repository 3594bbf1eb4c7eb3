"""MPI on the node: which implementation ``mpirun`` is, its version, and mpi4py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.capture import Capture
from doctor.facts.frameworks import Package, package
from doctor.model import Missing

# Banners of ``mpirun --version``, most specific first: Intel MPI is Hydra-based like MPICH, so
# its banner must win over the generic "HYDRA build details" (as Horovod's detector does).
_BANNERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Intel MPI", re.compile(r"Intel\(R\) MPI Library.*?Version\s+(\S+)")),
    ("Open MPI", re.compile(r"\((?:Open MPI|OpenRTE)\)\s+(\S+)")),
    ("IBM Spectrum MPI", re.compile(r"IBM Spectrum MPI\D*(\d[\w.]*)")),
    ("MPICH", re.compile(r"(?:HYDRA build details|MPICH).*?Version:\s+(\S+)", re.S)),
)


@dataclass(frozen=True)
class MpiFacts:
    implementation: str | Missing  # "Open MPI", "MPICH", "Intel MPI", "IBM Spectrum MPI"
    version: str | Missing
    mpirun: str | Missing  # the launcher's real path
    mpi4py: Package | None
    mpi4py_built_with: str | None  # mpi4py's mpi.cfg "mpicc = ..." line: the MPI it was built for


def parse_mpirun_version(text: str) -> tuple[str, str] | None:
    for name, pattern in _BANNERS:
        m = pattern.search(text)
        if m:
            return name, m.group(1)
    return None


def parse_mpi(cap: Capture) -> MpiFacts | Missing:
    result = cap.command("mpi:mpirun")
    if isinstance(result, Missing):
        result = cap.command("mpi:mpiexec")
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
    built_with = None
    if mpi4py is not None:
        cfg = cap.file(f"{mpi4py.location}/mpi.cfg")
        if isinstance(cfg, str):
            built_with = next(
                (ln.partition("=")[2].strip() for ln in cfg.splitlines() if ln.startswith("mpicc")),
                None,
            )
    return MpiFacts(impl, version, launcher, mpi4py, built_with)
