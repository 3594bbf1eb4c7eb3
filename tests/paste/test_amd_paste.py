"""Pasted AMD outputs become AMD facts: rocm-smi, rocm-smi --showtopo, amd-smi (default, list,
static, topology), rocminfo. The fixtures (tests/fixtures/amd) are written from the tools'
sources, not captured: no AMD GPU here."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.amd import xgmi
from doctor.core.model import Status
from doctor.facts.amd.model import AmdFacts
from doctor.facts.gpu import GpuFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.runner import run_checks
from tests import factkit as fk
from tests.amdtree import bdf
from tests.paste.pastekit import read_text

AMD = Path(__file__).parent.parent / "fixtures" / "amd"


def _facts(*names: str, crlf: bool = False) -> NodeFacts:
    text = "".join((AMD / n).read_text() for n in names)
    return parse_node("n1", read_text(text.replace("\n", "\r\n") if crlf else text))


def _amd(facts: NodeFacts) -> AmdFacts:
    assert isinstance(facts.amd, AmdFacts), facts.amd
    return facts.amd


@pytest.mark.parametrize(
    "name",
    [
        "rocm-smi.txt",
        "rocm-smi-showtopo.txt",
        "amd-smi.txt",
        "amd-smi-list.txt",
        "amd-smi-static.txt",
        "amd-smi-topology.txt",
        "amd-smi-static.json",
        "amd-smi-topology.json",
        "rocm-smi-showtopo.json",
        "rocminfo.txt",
    ],
)
def test_each_output_lists_the_eight_gpus(name: str) -> None:
    for crlf in (False, True):
        facts = _facts(name, crlf=crlf)
        assert len(_amd(facts).gpus) == 8
        assert isinstance(facts.gpus, GpuFacts) and facts.gpus.source == "amdgpu"


@pytest.mark.parametrize(
    "name", ["amd-smi.txt", "amd-smi-list.txt", "amd-smi-static.txt", "amd-smi-static.json"]
)
def test_bus_ids_come_from_amd_smi(name: str) -> None:
    assert [g.bus_id for g in _amd(_facts(name)).gpus] == [bdf(i) for i in range(8)]


def test_rocminfo_gives_bus_ids_names_and_the_driver() -> None:
    amd = _amd(_facts("rocminfo.txt"))
    assert [g.bus_id for g in amd.gpus] == [bdf(i) for i in range(8)]
    assert {g.product for g in amd.gpus} == {"AMD Instinct MI300X"}
    assert amd.amdgpu_version == "6.8.5"


@pytest.mark.parametrize("name", ["amd-smi-static.txt", "amd-smi-static.json"])
def test_static_gives_names_numa_pcie_and_driver(name: str) -> None:
    amd = _amd(_facts(name))
    g = amd.gpus[5]
    assert (g.product, g.numa_node, g.link_width_max, g.link_gen_max) == (
        "AMD Instinct MI300X",
        1,
        16,
        5,
    )
    assert amd.amdgpu_version == "6.8.5"


def test_default_table_gives_the_versions() -> None:
    amd = _amd(_facts("amd-smi.txt"))
    assert (amd.rocm_version, amd.amdgpu_version) == ("6.4.0", "6.10.5")


@pytest.mark.parametrize(
    "topology",
    [
        "rocm-smi-showtopo.txt",
        "rocm-smi-showtopo.json",
        "amd-smi-topology.txt",
        "amd-smi-topology.json",
    ],
)
def test_topology_outputs_give_the_link_types_and_the_xgmi_check_sees_the_pcie_pair(
    topology: str,
) -> None:
    facts = _facts("amd-smi-list.txt", topology)
    pairs = _amd(facts).pair_links()
    assert len(pairs) == 28
    assert pairs[frozenset((bdf(2), bdf(6)))].type == "PCIe"
    assert pairs[frozenset((bdf(0), bdf(1)))].type == "XGMI"
    assert pairs[frozenset((bdf(0), bdf(1)))].hops == 1
    (result,) = run_checks([xgmi], fk.cluster(facts))
    assert result.status is Status.FAIL
    assert result.findings[0].evidence == (f"GPU2 ({bdf(2)}) ↔ GPU6 ({bdf(6)}): PCIe only",)


def test_showtopo_alone_names_gpus_by_index_and_reads_numa() -> None:
    amd = _amd(_facts("rocm-smi-showtopo.txt"))
    assert [g.bus_id for g in amd.gpus][:2] == ["GPU0", "GPU1"]
    assert [g.numa_node for g in amd.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_a_paste_says_nothing_about_the_host() -> None:
    facts = _facts("amd-smi-static.txt", "rocm-smi-showtopo.txt")
    results = run_checks([c for c in __import__("checks.amd").amd.CHECKS], fk.cluster(facts))
    by_id = {r.check: r for r in results}
    assert by_id["amd.host"].status is Status.SKIP  # no environment was pasted
    assert by_id["amd.gdr"].status is Status.SKIP
    assert all(r.status is not Status.CRASH for r in results)


def test_amd_outputs_among_other_pastes_and_junk() -> None:
    text = (
        "$ amd-smi list\n"
        + (AMD / "amd-smi-list.txt").read_text()
        + "some note the user typed\n\nroot@mi300x-1:~# rocm-smi --showtopo\n"
        + "    "  # indented, as in a Markdown code block
        + (AMD / "rocm-smi-showtopo.txt").read_text().replace("\n", "\n    ")
    )
    amd = _amd(parse_node("n1", read_text(text)))
    assert len(amd.gpus) == 8 and amd.gpus[0].bus_id == bdf(0)
    assert amd.pair_links()[frozenset((bdf(2), bdf(6)))].type == "PCIe"


def test_amd_smi_version_lines_give_rocm_drift_between_pasted_nodes() -> None:
    from checks.amd import drift

    # Written, not captured: amdsmi_cli amdsmi_commands.py version() prints this one line.
    line = "AMDSMI Tool: 24.6.3+9578815 | AMDSMI Library version: 24.6.3.0 | ROCm version: {}\n"
    nodes = [
        parse_node(name, read_text(line.format(rocm), name))
        for name, rocm in (("a", "6.2.1"), ("b", "6.2.1"), ("c", "6.3.0"))
    ]
    assert _amd(nodes[0]).rocm_version == "6.2.1" and _amd(nodes[0]).gpus == ()
    (result,) = run_checks([drift], fk.cluster(*nodes))
    assert [(f.code, f.nodes) for f in result.findings] == [("drift.rocm", ("c",))]


def test_bad_pages_pending_and_unretirable_become_findings() -> None:
    from checks.amd import bad_pages
    from checks.gpu_health import memory_repair

    facts = _facts("amd-smi-list.txt", "amd-smi-bad-pages.txt")
    gpus = _amd(facts).gpus
    assert [(g.bad_pages_pending, g.bad_pages_failed) for g in gpus][3:6] == [
        (2, 0),
        (0, 0),
        (0, 1),
    ]
    found = {
        f.code: f
        for r in run_checks([bad_pages, memory_repair], fk.cluster(facts))
        for f in r.findings
    }
    assert found["gpu.retired.pending"].evidence == (f"GPU3 ({bdf(3)})",)
    assert found["amd.bad_pages.failed"].evidence == (
        f"GPU5 ({bdf(5)}): 1 page(s) could not be retired",
    )


def test_rocm_smi_showhw_rows_give_bus_ids() -> None:
    # Written, not captured: rocm_smi.py showAllConciseHw (ROCm 6.2), its header and one row
    # per GPU with the BUS column.
    text = (
        "============ ROCm System Management Interface ============\n"
        "========== Concise Hardware Info ==========\n"
        "GPU  NODE  DID     GUID   GFX VER  GFX RAS  SDMA RAS  UMC RAS  VBIOS  BUS           "
        "PARTITION ID\n"
        "0    2     0x74a1  28851  gfx942   ENABLED  ENABLED   ENABLED  N/A    0000:05:00.0  0\n"
        "1    3     0x74a1  29962  gfx942   ENABLED  ENABLED   ENABLED  N/A    0000:15:00.0  0\n"
        "============ End of ROCm SMI Log ============\n"
    )
    amd = _amd(parse_node("n1", read_text(text)))
    assert [g.bus_id for g in amd.gpus] == [bdf(0), bdf(1)]
