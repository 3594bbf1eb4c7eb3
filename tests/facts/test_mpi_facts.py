"""MPI facts from real captures: Open MPI (system), MPICH 4.0.2 and Intel MPI 2021.19 (each
run from its own Debian/PyPI package on this machine), and an mpi4py binary wheel."""

from __future__ import annotations

import pytest
from capturekit import overlay, raw_capture

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.mpi import MpiFacts, parse_mpi, parse_mpirun_version


@pytest.mark.parametrize(
    ("capture", "implementation", "version", "launcher"),
    [
        ("cpu-torch-wheel", "Open MPI", "4.1.4", "/usr/bin/orterun"),
        ("cpu-mpich", "MPICH", "4.0.2", "/tmp/mpich-x/root/usr/bin/mpiexec.hydra"),
        (
            "cpu-intel-mpi",
            "Intel MPI",
            "2021.19.0",
            "/tmp/impi/x/impi_rt-2021.19.0.data/data/bin/mpirun",
        ),
    ],
)
def test_real_mpirun_banners(
    capture: str, implementation: str, version: str, launcher: str
) -> None:
    mpi = parse_mpi(Capture(raw_capture(capture)))
    assert isinstance(mpi, MpiFacts)
    assert (mpi.implementation, mpi.version, mpi.mpirun) == (implementation, version, launcher)
    assert mpi.mpi4py is None


def test_mpi4py_wheel_is_read_without_importing() -> None:
    mpi = parse_mpi(Capture(raw_capture("cpu-mpi4py-wheel")))
    assert isinstance(mpi, MpiFacts) and mpi.mpi4py is not None
    assert mpi.mpi4py.version == "4.1.2"
    assert mpi.mpi4py_built_for == "mpich, openmpi ABI"


def test_no_mpirun_and_no_mpi4py_is_missing() -> None:
    absent = {"argv": ["mpirun", "--version"], "error": {"kind": "absent", "detail": "not on PATH"}}
    mpi = parse_mpi(overlay(raw_capture("cpu-torch-wheel"), commands={"mpi:mpirun": absent}))
    assert isinstance(mpi, Missing) and mpi.kind == "absent" and "not on PATH" in mpi.reason


def test_unrecognised_banner_keeps_the_first_line() -> None:
    odd = {"argv": ["/opt/x/mpirun", "--version"], "rc": 0, "stdout": "mystery mpi 1.0\n"}
    mpi = parse_mpi(overlay(raw_capture("cpu-torch-wheel"), commands={"mpi:mpirun": odd}))
    assert isinstance(mpi, MpiFacts) and isinstance(mpi.implementation, Missing)
    assert "mystery mpi 1.0" in mpi.implementation.reason


def test_intel_banner_wins_over_hydra() -> None:
    # Intel MPI is Hydra-based; its banner must not be read as MPICH.
    text = "Intel(R) MPI Library for Linux* OS, Version 2019 Update 9 Build 20200923\n"
    text += "HYDRA build details:\n    Version:   3.2\n"
    assert parse_mpirun_version(text) == ("Intel MPI", "2019 Update 9")
