"""On a node with AMD GPUs the NIC prediction follows RCCL, the library its jobs load, not a
stray libnccl (doctor/nic/library.py pick); elsewhere NCCL's order stays."""

from __future__ import annotations

from doctor.core.model import Missing
from doctor.facts.amd.text_output import TextFacts, TextGpu, amd_from_text
from doctor.facts.nccl.libraries import NcclFacts, NcclLibrary
from doctor.nic.library import nccl_version, pick
from tests import factkit as fk

NONE = Missing("not probed", "unsupported")


def _lib(path: str, version: str) -> NcclLibrary:
    return NcclLibrary(path, (path,), ("rocm",), version, None, NONE, "")


NCCL = NcclFacts(
    libraries=(
        _lib("/py/site-packages/nvidia/nccl/lib/libnccl.so.2", "2.28.3"),
        _lib("/opt/rocm-6.2.1/lib/librccl.so.1.0", "2.20.5"),
    ),
    loader_pick=None,
    torch_pick=None,
    net_plugins=(),
    conf_files=(),
)


def test_an_amd_node_predicts_with_rccl() -> None:
    amd = amd_from_text(TextFacts(gpus={0: TextGpu(0, bus_id="0000:05:00.0")}, sources=["x"]))
    facts = fk.node(nccl=NCCL, amd=amd)
    lib = pick(facts)
    assert lib is not None and lib.rccl and nccl_version(facts) == (2, 20, 5)


def test_a_node_without_amd_gpus_keeps_nccls_order() -> None:
    lib = pick(fk.node(nccl=NCCL))
    assert lib is not None and not lib.rccl
