"""Small builders for facts, so check tests state only what matters to them.

Facts come out as the pipeline leaves them: with their NIC plan derived (reachability not tested).
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.cluster import ClusterFacts
from doctor.facts.frameworks import FrameworkFacts, Package, TorchFacts
from doctor.facts.mpi import MpiFacts
from doctor.facts.nccl.libraries import NcclConf, NcclFacts, NcclLibrary
from doctor.facts.node import FACT_AREAS, NodeFacts, parse_node
from doctor.facts.nvidia.driver import DriverFacts
from doctor.facts.pci import PciDevice
from doctor.facts.system import SystemFacts
from doctor.nic.plan import with_plan

CAPTURES = Path(__file__).parent / "fixtures" / "captures"
NOT_HERE = Missing("not part of this test", "unsupported")
WHEEL = "/py/site-packages/nvidia/nccl/lib/libnccl.so.2"
SYSTEM = "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3"


def node(name: str = "node1", **areas: Any) -> NodeFacts:
    """NodeFacts with the given areas; every other area is Missing."""
    values = {area: areas.pop(area, NOT_HERE) for area in FACT_AREAS}
    assert not areas, f"unknown fact areas: {sorted(areas)}"
    return with_plan(NodeFacts(node=name, capture=Capture({"probe": {}}), **values))


def raw(name: str) -> dict[str, Any]:
    """A real probe capture from tests/fixtures/captures."""
    return json.loads((CAPTURES / f"{name}.json").read_text())


def real(
    name: str, node: str = "vm", raw_capture: dict[str, Any] | None = None, **areas: Any
) -> NodeFacts:
    """The facts of a real capture (or of ``raw_capture``, an edited copy of one), with the
    given areas replaced."""
    facts = parse_node(node, Capture(raw_capture if raw_capture is not None else raw(name)))
    return with_plan(dataclasses.replace(facts, **areas))


@cache
def _live_raw() -> dict[str, Any]:
    from tests.conftest import run_probe

    return run_probe()


def live(node: str = "vm", **areas: Any) -> NodeFacts:
    """This machine's facts, probed now (once per test run), with the given areas replaced."""
    return real("", node, _live_raw(), **areas)


def cluster(*nodes: NodeFacts, baseline: NodeFacts | None = None) -> ClusterFacts:
    return ClusterFacts({n.node: n for n in nodes}, baseline=baseline)


def gpu(address: str = "0000:07:00.0", driver: str | None = "nvidia") -> PciDevice:
    return PciDevice(address, 0x10DE, 0x2330, 0x030200, driver, 0, "0-15", (address,))


def nic(address: str = "0000:31:00.0") -> PciDevice:
    return PciDevice(address, 0x15B3, 0x1021, 0x020700, "mlx5_core", 0, "0-15", (address,))


def driver(
    version: str = "570.133.20",
    cuda: str = "12.8",
    nvml_error: str | None = None,
    libcuda_error: str | None = None,
) -> DriverFacts:
    return DriverFacts(version, version, "open", cuda, nvml_error, libcuda_error)


def lib(
    path: str = WHEEL, version: str | Missing = "2.27.7", sources: tuple[str, ...] = ("wheel",)
) -> NcclLibrary:
    return NcclLibrary(path, (path,), sources, version, "12.9", "ab" * 128, "")


def nccl(
    *libraries: NcclLibrary,
    torch: str | Missing | None = WHEEL,
    loader: str | None = None,
    plugins: tuple[str, ...] = (),
    conf: tuple[NcclConf, ...] = (),
) -> NcclFacts:
    return NcclFacts(tuple(libraries), loader, torch, plugins, conf)


def system(python: str = "3.11.7", kernel: str = "6.8.0-45-generic") -> SystemFacts:
    return SystemFacts(
        "host",
        "Ubuntu 22.04",
        kernel,
        "x86_64",
        python,
        "/usr/bin/python3",
        "id",
        16,
        (0,),
        None,
        0.0,
    )


def torch(version: str = "2.7.1+cu128", cuda: str | None = "12.8") -> FrameworkFacts:
    pkg = Package("torch", "/py/site-packages/torch", version, ())
    return FrameworkFacts(TorchFacts(pkg, cuda, None, None, None), None, None)


def mpi(implementation: str = "Open MPI", version: str = "4.1.6") -> MpiFacts:
    return MpiFacts(implementation, version, "/usr/bin/mpirun", None, None)
