"""NCCL on one node: there is one, only one version is reachable, torch and the system agree."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.nccl.libraries import LOGGED, NcclFacts, NcclLibrary
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

NONE_FIX = Fix(
    "Install NCCL: the wheel torch uses, or the system package for programs linked against it.",
    commands("pip install nvidia-nccl-cu12", "sudo apt-get install libnccl2"),
)


def _describe(lib: NcclLibrary | None) -> str:
    if lib is None:
        return "none"
    return f"{lib.version if isinstance(lib.version, str) else '?'} ({lib.path})"


def _picks(nccl: NcclFacts) -> tuple[str, str]:
    torch = nccl.torch_pick
    if isinstance(torch, Missing):
        torch_text = f"torch: {torch.reason}"
    elif torch is None:
        torch_text = "torch (a CPU build) loads none"
    else:
        torch_text = f"torch loads {_describe(nccl.library(torch))}"
    return torch_text, _describe(nccl.library(nccl.loader_pick))


def _cuda_torch(facts: NodeFacts) -> bool:
    torch = None if isinstance(facts.frameworks, Missing) else facts.frameworks.torch
    return torch is not None and torch.cuda is not None


def _has_gpu(facts: NodeFacts) -> bool:
    pci = facts.pci
    return not isinstance(pci, Missing) and any(d.is_nvidia_gpu for d in pci)


@node_check(
    "nccl.libraries",
    "NCCL is installed, loadable, and only one version of it is reachable",
    needs=("nccl",),
    codes={
        "nccl.none": "no libnccl on a node with NVIDIA GPUs",
        "nccl.several_versions": "more than one NCCL version is reachable on the node",
        "nccl.unloadable": "a libnccl was found but could not be loaded and asked its version",
    },
)
def nccl_libraries(facts: NodeFacts) -> Iterator[Finding]:
    nccl = need(facts.nccl)
    torch_text, loader_text = _picks(nccl)
    if not nccl.libraries:
        if not _has_gpu(facts):
            raise Skip("no libnccl, and no NVIDIA GPU that needs one")
        if _cuda_torch(facts):
            raise Skip("no separate libnccl: torch's NCCL is linked into libtorch_cuda.so")
        yield Finding(
            "nccl.none",
            Severity.FAIL,
            "no libnccl found on a node with NVIDIA GPUs",
            evidence=("searched LD_LIBRARY_PATH, the ld.so cache, site-packages, torch/lib",),
            fix=NONE_FIX,
        )
        return
    # A pasted NCCL_DEBUG=INFO log stands for the library it shows: one without a version line
    # is an excerpt that left it out, not a library that failed to load.
    shown = [lib for lib in nccl.libraries if lib.path != LOGGED or isinstance(lib.version, str)]
    if not shown:
        raise Skip("the pasted NCCL log shows no version line: no library to judge")
    for lib in shown:
        if isinstance(lib.version, Missing):
            yield Finding(
                "nccl.unloadable",
                Severity.WARN,
                f"{lib.path} could not be loaded: {lib.version.reason}",
                evidence=(f"found via {', '.join(lib.sources)} as {', '.join(lib.found_as)}",),
                fix=Fix(
                    "Remove the broken copy or fix what it needs (wrong architecture, missing "
                    "libraries: see ldd).",
                    (command("ldd {}", lib.path),),
                ),
            )
    versions = sorted({lib.version for lib in nccl.libraries if isinstance(lib.version, str)})
    if len(versions) < 2:
        return
    yield Finding(
        "nccl.several_versions",
        Severity.WARN,
        f"{len(versions)} NCCL versions reachable ({', '.join(versions)}): {torch_text}; "
        f"LD_LIBRARY_PATH/ld.so users get {loader_text}",
        evidence=tuple(f"{_describe(lib)} via {', '.join(lib.sources)}" for lib in nccl.libraries),
        fix=Fix(
            "Keep one NCCL version per node: remove the extra copies, or make LD_LIBRARY_PATH "
            "and the torch wheel's nvidia-nccl-cu* agree.",
            commands("pip show nvidia-nccl-cu12 nvidia-nccl-cu13", "ldconfig -p | grep libnccl"),
        ),
        data={"versions": versions},
    )


@node_check(
    "nccl.torch_vs_system",
    "torch loads the same NCCL version as programs using the system NCCL",
    needs=("nccl",),
    codes={
        "nccl.torch_differs": "torch's NCCL differs from the one the dynamic loader gives others",
    },
)
def nccl_torch_vs_system(facts: NodeFacts) -> Iterator[Finding]:
    nccl = need(facts.nccl)
    torch_path = need(nccl.torch_pick, "torch's NCCL")
    if torch_path is None:
        raise Skip("torch is a CPU build: it loads no NCCL")
    if nccl.loader_pick is None:
        raise Skip("no system libnccl (none on LD_LIBRARY_PATH or in the ld.so cache)")
    torch_lib, system_lib = nccl.library(torch_path), nccl.library(nccl.loader_pick)
    if torch_lib is None or system_lib is None:
        raise Skip("torch's or the system's libnccl was not probed")
    torch_version = need(torch_lib.version, "torch's NCCL version")
    system_version = need(system_lib.version, "system NCCL version")
    if torch_version == system_version:
        return
    cuda_major = (torch_lib.cuda or system_lib.cuda or "12").split(".")[0]
    yield Finding(
        "nccl.torch_differs",
        Severity.WARN,
        f"torch loads NCCL {torch_version}, the system NCCL is {system_version}",
        evidence=(
            f"torch: {torch_lib.path}",
            f"LD_LIBRARY_PATH/ld.so: {system_lib.path}",
        ),
        fix=Fix(
            "Programs built against the system NCCL (nccl-tests, Horovod, MPI jobs) will run a "
            f"different NCCL than torch. Install the matching wheel or system package so both "
            f"are {torch_version}, or point LD_LIBRARY_PATH at torch's copy.",
            (
                command("pip install nvidia-nccl-cu{}=={}", cuda_major, torch_version),
                command(
                    "export LD_LIBRARY_PATH={}:$LD_LIBRARY_PATH", torch_lib.path.rsplit("/", 1)[0]
                ),
            ),
        ),
        data={"torch": torch_version, "system": system_version},
    )


CHECKS = [nccl_libraries, nccl_torch_vs_system]
