"""Pasted MPI version outputs into the probe's ``mpirun --version`` slot, for doctor/facts/mpi.py.

`mpirun --version` / `mpiexec --version` (Open MPI, MPICH's Hydra, Intel MPI), `ompi_info` (its
head or all of it), `mpichversion`, `mpiname -a` and the MPI_Get_library_version strings that
mpi4py prints all name the implementation and its version; the facts parser's banners read each.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.facts.mpi import parse_mpirun_version
from doctor.paste.kind import Kind, command

_OPENS = re.compile(
    r"\((?:Open MPI|OpenRTE|IBM Spectrum MPI)\)\s+\d"  # mpirun (Open MPI) 4.1.4
    r"|^\s*Package:.*Open ?MPI|^\s*Open MPI:\s+\d"  # ompi_info
    r"|Open MPI v\d"  # MPI_Get_library_version
    r"|^ompi:version:full:"  # ompi_info --parsable
    r"|Intel\(R\) MPI Library"
    r"|HYDRA build details:"
    r"|MPICH Version:"
    r"|MVAPICH2?\s*(?:Version|\d)"
    r"|CRAY MPICH version"
    r"|IBM Spectrum MPI\s+\d",
    re.I,
)


def _argv(text: str) -> list[str]:
    """What was most likely run to print this (kept with the text, never judged on)."""
    if re.search(r"^\s*(?:Package|Open MPI):|^ompi:version:", text, re.M):
        return ["ompi_info"]
    if "MPICH Version:" in text and "HYDRA" not in text:
        return ["mpichversion"]
    launcher = re.search(r"^\s*(mpirun|mpiexec|orterun|mpiexec\.hydra)\b", text, re.M)
    if launcher or "HYDRA build details" in text or "(Open MPI)" in text:
        return [launcher.group(1) if launcher else "mpirun", "--version"]
    return ["MPI_Get_library_version"]


def parse(text: str) -> dict[str, Any]:
    """The segment as the launcher's output; {} when it names no MPI version after all."""
    if parse_mpirun_version(text) is None:
        return {}
    argv = _argv(text)
    note = f"pasted `{' '.join(argv)}` output"
    return {"commands": {"mpi:mpirun": command(argv, text, note)}}


MPI_KINDS = [Kind("mpi", lambda line: _OPENS.search(line) is not None, parse)]
DESCRIPTIONS = {
    "mpi": "`mpirun --version` / `mpiexec --version` (Open MPI, MPICH, Intel MPI, MVAPICH, Cray "
    "MPICH), `ompi_info`, `mpichversion`, MPI_Get_library_version strings",
}
