"""Pasted MPI version outputs, env and NCCL logs become the MPI, env and NCCL facts."""

from __future__ import annotations

import pytest

from doctor.core.model import Missing
from doctor.facts.mpi import MpiFacts, parse_mpi
from doctor.facts.nccl.libraries import NcclFacts, parse_nccl
from doctor.facts.node import parse_node
from tests.paste.pastekit import captured_stdout, pasted, read_text, written_blocks


def mpi_of(text: str) -> tuple[str | Missing, str | Missing]:
    mpi = parse_mpi(read_text(text))
    assert isinstance(mpi, MpiFacts), mpi
    return mpi.implementation, mpi.version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (pasted("openmpi-mpirun-version.txt"), ("Open MPI", "4.1.4")),
        (pasted("ompi_info.txt"), ("Open MPI", "4.1.4")),
        ("".join(pasted("ompi_info.txt").splitlines(True)[:4]), ("Open MPI", "4.1.4")),
        (pasted("openmpi-library-version.txt"), ("Open MPI", "4.1.4")),
        (pasted("mpich-mpichversion.txt"), ("MPICH", "4.0.2")),
        (pasted("mpich-library-version.txt"), ("MPICH", "4.0.2")),
        (captured_stdout("cpu-mpich", "mpi:mpirun"), ("MPICH", "4.0.2")),
        (captured_stdout("cpu-intel-mpi", "mpi:mpirun"), ("Intel MPI", "2021.19.0")),
    ],
    ids=[
        "mpirun",
        "ompi_info",
        "ompi_info-head",
        "openmpi-lib",
        "mpichversion",
        "mpich-lib",
        "hydra",
        "intel",
    ],
)
def test_captured_mpi_outputs(text: str, expected: tuple[str, str]) -> None:
    assert mpi_of(f"$ some command\n{text}") == expected


WRITTEN = {
    "MVAPICH2 mpiname -a": ("MVAPICH", "2.3.7"),
    "MVAPICH2 MPI_Get_library_version": ("MVAPICH", "2.3.7"),
    "MVAPICH 3 MPI_Get_library_version": ("MVAPICH", "3.0"),
    "Cray MPICH MPI_Get_library_version": ("Cray MPICH", "8.1.27.26"),
    "Intel MPI MPI_Get_library_version": ("Intel MPI", "2021.11"),
    "Intel MPI 2019 mpirun --version": ("Intel MPI", "2019 Update 9"),
    "IBM Spectrum MPI mpirun --version": ("IBM Spectrum MPI", "10.4.0.3"),
}


@pytest.mark.parametrize("title", sorted(WRITTEN))
def test_written_mpi_outputs(title: str) -> None:
    assert mpi_of(written_blocks("written-mpi-versions.txt")[title]) == WRITTEN[title]


def test_mpi4py_printed_string_with_python_around_it() -> None:
    text = (
        ">>> from mpi4py import MPI\n>>> print(MPI.Get_library_version())\n"
        + pasted("openmpi-library-version.txt")
        + ">>>\n"
    )
    assert mpi_of(text) == ("Open MPI", "4.1.4")


@pytest.mark.parametrize(
    "shape",
    [
        # print(MPI.Get_library_version()) where the copy lost the tabs: "MPICH Version:4.0.2"
        lambda text: ">>> print(MPI.Get_library_version())\n" + text.replace("\t", ""),
        # the REPL's echo of the string typed at a terminal (the captured session's prompts
        # came without the echoed input, below)
        lambda text: ">>> MPI.Get_library_version()\n" + repr(text) + "\n>>>\n",
        # the block from its second line on, the version further down
        lambda text: "".join(text.splitlines(True)[1:3] + text.splitlines(True)[:1]),
    ],
    ids=["tabs-lost", "repr", "version-not-first"],
)
def test_mpich_library_version_as_mpi4py_shows_it(shape) -> None:
    # Each shape derived from the real MPICH 4.0.2 MPI_Get_library_version capture.
    assert mpi_of(shape(pasted("mpich-library-version.txt"))) == ("MPICH", "4.0.2")


def test_mpi4py_repl_session_captured() -> None:
    # `python -i` with mpi4py 4.1.2 on Debian's libmpich12 4.0.2: the repr on one line.
    assert mpi_of(pasted("mpi4py-mpich-repl.txt")) == ("MPICH", "4.0.2")


def test_env_keeps_only_the_communication_settings() -> None:
    env = parse_node("n1", read_text(pasted("env.txt"))).env
    assert env == {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "OMPI_MCA_btl_tcp_if_include": "eth0",
        "UCX_NET_DEVICES": "mlx5_0:1",
    }


def test_export_and_declare_forms() -> None:
    text = "declare -x NCCL_IB_HCA=\"mlx5_0,mlx5_1\"\nexport NCCL_NET_GDR_LEVEL='PHB'\nHOME=/x\n"
    assert parse_node("n1", read_text(text)).env == {
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_NET_GDR_LEVEL": "PHB",
    }


def test_nccl_log_gives_the_version_cuda_and_interfaces() -> None:
    nccl = parse_nccl(read_text(pasted("written-nccl-init.log")))
    assert isinstance(nccl, NcclFacts)
    [lib] = nccl.libraries
    assert (lib.version, lib.cuda, lib.sources) == ("2.21.5", "12.4", ("log",))
    assert nccl.log is not None
    [proc] = nccl.log["processes"]
    assert proc["bootstrap"] == ["eth0:10.1.0.12"] and proc["transports"] == {"NET/Socket": 2}
    assert isinstance(nccl.torch_pick, Missing)


def test_a_real_log_without_a_version_line_still_tells_what_nccl_used() -> None:
    nccl = parse_nccl(read_text(pasted("nccl-debug-bootstrap.log")))
    assert isinstance(nccl, NcclFacts) and nccl.log is not None
    (lib,) = nccl.libraries
    assert isinstance(lib.version, Missing) and "no 'NCCL version' line" in lib.version.reason
    assert nccl.log["bootstrap"] == ["eth0"]


def test_pasted_nodes_have_no_invented_system_or_nccl_facts() -> None:
    facts = parse_node("n1", read_text(pasted("netns-ip-a.txt")))
    assert isinstance(facts.system, Missing) and isinstance(facts.nccl, Missing)
    assert isinstance(facts.mpi, Missing) and isinstance(facts.env, Missing)


def test_settings_before_a_command_line() -> None:
    text = "NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 torchrun --nproc-per-node 8 train.py\n"
    assert parse_node("n1", read_text(text)).env == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}


def test_ompi_info_parsable() -> None:
    text = "package:Debian OpenMPI\nompi:version:full:4.1.4\nompi:version:repo:v4.1.4\n"
    assert mpi_of(text) == ("Open MPI", "4.1.4")
